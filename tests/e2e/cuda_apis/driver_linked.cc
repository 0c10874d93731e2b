// A driver-API program linked with -lcuda: calls the exported cu* functions directly (cuda.h maps
// cuMemAlloc to cuMemAlloc_v2 and so on).
#include <cuda.h>

#include "e2e_util.h"

int main() {
  CUcontext context;
  CUdeviceptr pooled, big, pitched, managed;
  size_t pitch = 0;
  E2E_OK(cuInit(0));
  E2E_OK(cuDevicePrimaryCtxRetain(&context, 0));
  E2E_OK(cuCtxSetCurrent(context));
  E2E_OK(cuMemAllocAsync(&pooled, 2 * kMiB, nullptr));  // device 0's first event is a pool block
  E2E_OK(cuMemAlloc(&big, 5 * kMiB));
  E2E_OK(cuMemAllocPitch(&pitched, &pitch, 300, 10, 4));                // 10 rows of 512 bytes: never freed
  E2E_OK(cuMemAllocManaged(&managed, 7 * kMiB, CU_MEM_ATTACH_GLOBAL));  // not device memory: never charged
  E2E_OK(cuMemFreeAsync(pooled, nullptr));
  E2E_OK(cuMemFree(big));
  E2E_OK(cuMemFree(managed));
  std::printf("pitch %zu, live at exit: %#llx\n", pitch, static_cast<unsigned long long>(pitched));
  return pitch == 512 ? 0 : 4;
}
