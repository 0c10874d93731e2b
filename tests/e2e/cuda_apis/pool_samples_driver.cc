// Pool samples through the driver API (linked with -lcuda): the exported synchronizations, pool and graph
// memory functions, and cuCtxSynchronize as cuGetProcAddress hands it out from CUDA 13.0 (with a context
// argument). check_pool_samples.py --mode driver has the POOL_RESERVED sequence this must produce.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>

#include "e2e_util.h"

extern "C" {
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* pointer, size_t size, CUstream stream);
CUresult cuStreamSynchronize_ptsz(CUstream stream);
void fakecuda_set_graph_memory(int device, uint64_t reserved_bytes, uint64_t used_bytes);
}

using ResolverV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

int main() {
  CUcontext context;
  CUdeviceptr a, b, c, d, e;
  CUmemoryPool pool0, user;
  CUevent event;
  E2E_OK(cuInit(0));
  E2E_OK(cuDevicePrimaryCtxRetain(&context, 0));
  E2E_OK(cuCtxSetCurrent(context));
  E2E_OK(cuDeviceGetMemPool(&pool0, 0));
  E2E_OK(cuMemAllocAsync(&a, 3 * kMiB, nullptr));  // reserved 4
  E2E_OK(cuMemFreeAsync(a, nullptr));
  E2E_OK(cuCtxSynchronize());                           // reserved 0
  E2E_OK(cuMemAllocAsync_ptsz(&b, 1 * kMiB, nullptr));  // reserved 2
  E2E_OK(cuMemFreeAsync(b, nullptr));
  E2E_OK(cuStreamSynchronize_ptsz(nullptr));       // reserved 0
  E2E_OK(cuMemAllocAsync(&c, 2 * kMiB, nullptr));  // reserved 2
  E2E_OK(cuMemFreeAsync(c, nullptr));

  // cuCtxSynchronize as the CUDA 13 runtime gets it: through the resolver, with the context argument.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  auto resolver = reinterpret_cast<ResolverV2>(driver ? dlsym(driver, "cuGetProcAddress_v2") : nullptr);
  void* ctx_synchronize = nullptr;
  CUdriverProcAddressQueryResult status;
  if (!resolver) return 4;
  E2E_OK(resolver("cuCtxSynchronize", &ctx_synchronize, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  E2E_OK(reinterpret_cast<CUresult (*)(CUcontext)>(ctx_synchronize)(context));  // reserved 0

  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  E2E_OK(cuMemPoolCreate(&user, &props));                        // first sample: 0
  E2E_OK(cuMemAllocFromPoolAsync(&d, 3 * kMiB, user, nullptr));  // reserved 4
  E2E_OK(cuMemFreeAsync(d, nullptr));
  E2E_OK(cuMemPoolTrimTo(user, 1 * kMiB));  // max(0, 1) rounded up: 2
  E2E_OK(cuMemPoolDestroy(user));           // 0

  E2E_OK(cuEventCreate(&event, 0));
  E2E_OK(cuMemAllocAsync(&e, 1 * kMiB, nullptr));  // pool0 reserved 2
  E2E_OK(cuMemFreeAsync(e, nullptr));
  E2E_OK(cuEventSynchronize(event));  // pool0 reserved 0
  E2E_OK(cuEventDestroy(event));

  fakecuda_set_graph_memory(1, 4 * kMiB, 2 * kMiB);
  E2E_OK(cuDeviceGraphMemTrim(1));  // device 1's graph pool: 2
  std::printf("pool0 %#llx user %#llx\n", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pool0)),
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(user)));
  return 0;
}
