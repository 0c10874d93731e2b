// A library for tests/e2e/python/deep_python_stack.py (ctypes): a cudaMalloc + cudaFree of 1 MiB made `depth` native
// frames below the caller, on the calling thread (which runs Python) or on a new thread (which does not), so
// that the tracer's native depth for threads with and without Python frames can both be seen from one process.
#include <cuda_runtime_api.h>

#include <thread>

#include "e2e_util.h"

namespace {

// Not inlined and not a tail call (the frame pointer and -O0 of e2e programs): one frame per level.
__attribute__((noinline)) int descend_and_allocate(int depth) {
  if (depth == 0) {
    void* memory = nullptr;
    E2E_OK(cudaMalloc(&memory, kMiB));
    E2E_OK(cudaFree(memory));
    return 0;
  }
  return descend_and_allocate(depth - 1) + 1;
}

}  // namespace

extern "C" int deep_alloc_here(int depth) { return descend_and_allocate(depth); }

extern "C" int deep_alloc_on_thread(int depth) {
  int levels = -1;
  std::thread([&] { levels = descend_and_allocate(depth); }).join();
  return levels;
}
