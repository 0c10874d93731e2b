// An out-of-memory failure: with FAKECUDA_TOTAL_BYTES = 64 MiB, 40 MiB are taken and then 100 MiB are
// asked for; the request fails with cudaErrorMemoryAllocation while 24 MiB are free.
#include <cuda_runtime_api.h>

#include "e2e_util.h"

__attribute__((noinline)) void request_too_much() {
  void* p = nullptr;
  E2E_FAILS_WITH(cudaErrorMemoryAllocation, cudaMalloc(&p, 100 * kMiB));
}

int main() {
  void* held = nullptr;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaMalloc(&held, 40 * kMiB));
  request_too_much();
  size_t free_bytes = 0, total_bytes = 0;
  E2E_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::printf("free %zu of %zu\n", free_bytes, total_bytes);
  E2E_OK(cudaFree(held));
  return 0;
}
