// An address freed by one thread and allocated at once by another: the trace must show the free before
// the allocation that reuses the address, whoever records first.
// With FAKECUDA_AFTER_FREE_HOOK=1 the fake driver calls fakecuda_test_after_free() once the memory of a
// free is released, before that free returns. The main thread frees X (8 MiB); from inside that free,
// a second thread allocates 8 MiB (Y) and finishes before the main thread's free returns. With
// FAKECUDA_REUSE_ADDRESSES=1 the driver hands the released range out again, so Y == X (printed:
// "address reused: yes").
// Order of what happened: alloc X 8 MiB, free X, alloc Y 8 MiB (= X), free Y: 4 events.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "e2e_util.h"

namespace {

std::atomic<bool> g_armed{false};
std::atomic<int> g_step{0};  // 1: the other thread may allocate; 2: it has
void* g_reused = nullptr;

// Started before the free (a thread created inside it would take the released range for its stack).
void allocate_on_other_thread() {
  while (g_step.load() != 1) std::this_thread::yield();
  E2E_OK(cudaMalloc(&g_reused, 8 * kMiB));
  g_step = 2;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void fakecuda_test_after_free(uintptr_t) {
  if (!g_armed.exchange(false)) return;
  g_step = 1;
  while (g_step.load() != 2) std::this_thread::yield();
}

int main() {
  void* first;
  E2E_OK(cudaMalloc(&first, 8 * kMiB));
  std::thread other(allocate_on_other_thread);
  g_armed = true;
  E2E_OK(cudaFree(first));
  other.join();
  std::printf("address reused: %s\n", g_reused == first ? "yes" : "no");
  E2E_OK(cudaFree(g_reused));
  return 0;
}
