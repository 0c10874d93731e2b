// Dynamic runtime (libcudart.so.13) on two devices, including a block freed while the other device is
// current. The fake runtime allocates through cuMemAlloc_v2 obtained from the driver resolver, so a
// tracer that sees both layers must still count each allocation once.
// Expected figures (worked out in check_runtime_two_devices.py) follow the sequence in main().
#include <cuda_runtime_api.h>

#include "e2e_util.h"

__attribute__((noinline)) void* allocate_kept_block() {
  void* p = nullptr;
  E2E_OK(cudaMalloc(&p, 6 * kMiB));  // still live at exit: the largest leak
  return p;
}

int main() {
  void *a, *b, *c, *d, *p, *q;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  E2E_OK(cudaMalloc(&b, 8 * kMiB));
  E2E_OK(cudaSetDevice(1));
  E2E_OK(cudaMallocAsync(&p, 1 * kMiB, nullptr));  // device 1's first event is a pool block
  E2E_OK(cudaMalloc(&c, 16 * kMiB));
  E2E_OK(cudaFree(b));                             // device 0 memory, freed while device 1 is current
  E2E_OK(cudaMallocAsync(&q, 2 * kMiB, nullptr));  // never freed
  E2E_OK(cudaFreeAsync(p, nullptr));
  E2E_OK(cudaFree(c));
  E2E_OK(cudaSetDevice(0));
  d = allocate_kept_block();
  E2E_OK(cudaFree(a));
  E2E_OK(cudaDeviceSynchronize());
  std::printf("live at exit: %p (6 MiB, device 0), %p (2 MiB pool block, device 1)\n", d, q);
  return 0;
}
