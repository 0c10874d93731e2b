// An allocation made by a static constructor, before main(): recorded, with a stack naming the
// constructor. Events: alloc 4 MiB (before main, kept: the only leak), alloc 8 MiB, free 8 MiB (3 events).
#include <cuda_runtime_api.h>

#include "e2e_util.h"

namespace {

__attribute__((noinline)) void* allocate_before_main() {
  void* p = nullptr;
  E2E_OK(cudaMalloc(&p, 4 * kMiB));  // the static constructor's allocation
  return p;
}

struct EarlyAllocation {
  void* block;
  __attribute__((noinline)) EarlyAllocation() : block(allocate_before_main()) {}
};

EarlyAllocation g_early;

}  // namespace

int main() {
  std::printf("main starts; allocated before main: %p\n", g_early.block);
  void* p;
  E2E_OK(cudaMalloc(&p, 8 * kMiB));
  E2E_OK(cudaFree(p));
  return 0;
}
