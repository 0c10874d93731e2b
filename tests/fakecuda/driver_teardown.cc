// The fake driver's process teardown (see driver_internal.h): the real driver destroys its contexts from
// an exit handler, and a cuMemFree that comes later answers CUDA_ERROR_DEINITIALIZED. Off unless
// FAKECUDA_DEINIT_AT_EXIT=1, so that the other tests keep freeing normally from their exit handlers.
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

}  // namespace fakecuda
