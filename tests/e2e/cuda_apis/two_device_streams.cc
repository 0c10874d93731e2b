// Stream-ordered memory on a stream of device 1 while device 0 is current: cudaMallocAsync takes the block
// from the pool of the stream's device, whichever device is current (CUDA's reference for cudaMallocAsync),
// and cudaFreeAsync returns it there. Expected figures: check_two_device_streams.py.
#include <cuda_runtime_api.h>

#include "e2e_util.h"

int main() {
  cudaStream_t stream;
  void *p, *q;
  E2E_OK(cudaSetDevice(1));
  E2E_OK(cudaStreamCreate(&stream));
  E2E_OK(cudaMallocAsync(&p, 128 * kMiB, stream));  // device 1 current
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaFreeAsync(p, stream));                // device 0 current, the block is device 1's
  E2E_OK(cudaMallocAsync(&q, 64 * kMiB, stream));  // device 0 current, the stream is device 1's
  E2E_OK(cudaFreeAsync(q, stream));
  E2E_OK(cudaStreamDestroy(stream));
  return 0;
}
