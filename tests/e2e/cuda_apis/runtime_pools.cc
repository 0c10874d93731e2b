// Stream-ordered allocations from explicit pools through the dynamic runtime, and managed memory.
// The pool of device 1 is used while device 0 is current: its blocks belong to device 1.
#include <cuda_runtime_api.h>

#include "e2e_util.h"

extern "C" cudaError_t cudaMallocFromPoolAsync_ptsz(void** pointer, size_t size, cudaMemPool_t pool,
                                                    cudaStream_t stream);

int main() {
  cudaMemPool_t pool0, pool1;
  void *x, *y, *z, *managed;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaDeviceGetDefaultMemPool(&pool0, 0));
  E2E_OK(cudaDeviceGetDefaultMemPool(&pool1, 1));
  E2E_OK(cudaMallocFromPoolAsync(&x, 3 * kMiB, pool1, nullptr));
  E2E_OK(cudaMallocFromPoolAsync_ptsz(&y, 1 * kMiB, pool0, nullptr));
  E2E_OK(cudaMallocFromPoolAsync(&z, 2 * kMiB, pool1, nullptr));  // never freed
  E2E_OK(cudaMallocManaged(&managed, 5 * kMiB, cudaMemAttachGlobal));
  E2E_OK(cudaFree(x));  // a pool block returned through cudaFree
  E2E_OK(cudaFreeAsync(y, nullptr));
  E2E_OK(cudaFree(managed));
  std::printf("live at exit: %p (2 MiB pool block, device 1)\n", z);
  return 0;
}
