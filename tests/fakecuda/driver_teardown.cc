// Test-only controls of the fake driver's free path (see driver_internal.h).
// Teardown: the real driver destroys its contexts from an exit handler, and a cuMemFree that comes later
// answers CUDA_ERROR_DEINITIALIZED. Off unless FAKECUDA_DEINIT_AT_EXIT=1, so that the other tests keep
// freeing normally from their exit handlers.
// After-free hook: off unless FAKECUDA_AFTER_FREE_HOOK=1.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "driver_internal.h"

namespace fakecuda {
namespace {

std::atomic<bool> g_torn_down{false};

void tear_down() { g_torn_down = true; }

}  // namespace

void teardown_register_at_init() {
  const char* setting = std::getenv("FAKECUDA_DEINIT_AT_EXIT");
  if (setting && std::strcmp(setting, "1") == 0) std::atexit(tear_down);
}

bool driver_torn_down() { return g_torn_down.load(); }

void run_after_free_hook(uintptr_t address) {
  using Hook = void (*)(uintptr_t);
  static const Hook hook = [] {
    const char* setting = std::getenv("FAKECUDA_AFTER_FREE_HOOK");
    if (!setting || std::strcmp(setting, "1") != 0) return Hook{nullptr};
    return reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "fakecuda_test_after_free"));
  }();
  if (hook) hook(address);
}

}  // namespace fakecuda
