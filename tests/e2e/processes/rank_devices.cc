// One rank of a torchrun-style job on the CUDA test double, with torch.cuda.set_device(LOCAL_RANK) forgotten at
// first: its first allocation lands on device 0 (the runtime's default), then it sets its own device and works
// there. Run once per rank by check_wrong_device.py with RANK, LOCAL_RANK and WORLD_SIZE set as torchrun sets them.
#include <cuda_runtime_api.h>

#include <cstdlib>

#include "e2e_util.h"

__attribute__((noinline)) void* stray_allocation() {
  void* p = nullptr;
  E2E_OK(cudaMalloc(&p, 2 * kMiB));  // the stray line: before cudaSetDevice, so on device 0
  return p;
}

int main() {
  const char* local_rank = std::getenv("LOCAL_RANK");
  const int device = local_rank ? std::atoi(local_rank) : 0;
  void* stray = stray_allocation();
  void* work = nullptr;
  E2E_OK(cudaSetDevice(device));
  E2E_OK(cudaMalloc(&work, 8 * kMiB));
  E2E_OK(cudaFree(work));
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaFree(stray));
  return 0;
}
