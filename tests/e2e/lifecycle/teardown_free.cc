// Frees during process teardown, after the driver has destroyed its contexts (FAKECUDA_DEINIT_AT_EXIT=1
// makes the fake driver do that from an exit handler registered by cuInit, as the real one does).
// A static object built before the first CUDA call is destroyed after that handler ran, so its frees
// are answered with 4: cudaErrorCudartUnloading (runtime) and CUDA_ERROR_DEINITIALIZED (driver).
// Events (MiB = 1048576 bytes):
//   main:     cudaMalloc 4 MiB (kept), cuMemAlloc_v2 8 MiB (kept), cudaMalloc 2 MiB, cudaFree 2 MiB (result 0)
//   teardown: cudaFree 4 MiB (result 4), cuMemFree_v2 8 MiB (result 4)
//   6 events, 2 of them teardown frees.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "e2e_util.h"

namespace {

struct KeptUntilExit {
  void* runtime_block = nullptr;
  CUdeviceptr driver_block = 0;
  ~KeptUntilExit() {
    int runtime_result = cudaFree(runtime_block);
    int driver_result = cuMemFree_v2(driver_block);
    std::printf("teardown: cudaFree -> %d, cuMemFree_v2 -> %d\n", runtime_result, driver_result);
    std::fflush(stdout);
  }
};

KeptUntilExit g_kept;

}  // namespace

int main() {
  E2E_OK(cudaMalloc(&g_kept.runtime_block, 4 * kMiB));
  E2E_OK(cuMemAlloc_v2(&g_kept.driver_block, 8 * kMiB));  // the runtime made device 0 current
  void* p;
  E2E_OK(cudaMalloc(&p, 2 * kMiB));
  E2E_OK(cudaFree(p));
  return 0;
}
