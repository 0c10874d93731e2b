// JAX/XLA style: libcuda.so.1 is opened with dlopen and every entry point is looked up with dlsym on
// that handle (the VMM functions), plus the pre-12.0 four-argument cuGetProcAddress obtained the same
// way. Physical memory goes to device 1 while device 0 is current.
#include <cuda.h>
#include <dlfcn.h>

#include "e2e_util.h"

#undef cuGetProcAddress
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

template <typename Fn>
Fn must_find(void* handle, const char* name) {
  void* fn = dlsym(handle, name);
  if (!fn) {
    std::fprintf(stderr, "dlsym(libcuda.so.1, %s) failed\n", name);
    std::exit(3);
  }
  return reinterpret_cast<Fn>(fn);
}
#define FIND(name) auto name = must_find<decltype(&::name)>(libcuda, #name)

int main() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) return 3;
  FIND(cuInit);
  FIND(cuDevicePrimaryCtxRetain);
  FIND(cuCtxSetCurrent);
  FIND(cuMemAlloc_v2);
  FIND(cuMemCreate);
  FIND(cuMemRelease);
  FIND(cuMemAddressReserve);
  FIND(cuMemAddressFree);
  FIND(cuMemMap);
  FIND(cuMemUnmap);
  FIND(cuMemSetAccess);
  auto get_proc_address = must_find<GetProcAddressV1>(libcuda, "cuGetProcAddress");
  decltype(&::cuMemAlloc_v2) alloc_from_resolver = nullptr;
  decltype(&::cuMemFree_v2) free_from_resolver = nullptr;
  E2E_OK(get_proc_address("cuMemAlloc", reinterpret_cast<void**>(&alloc_from_resolver), 3020, 0));
  E2E_OK(get_proc_address("cuMemFree", reinterpret_cast<void**>(&free_from_resolver), 3020, 0));

  CUcontext context;
  E2E_OK(cuInit(0));
  E2E_OK(cuDevicePrimaryCtxRetain(&context, 0));
  E2E_OK(cuCtxSetCurrent(context));

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  CUmemGenericAllocationHandle first, second;
  CUdeviceptr va;
  E2E_OK(cuMemCreate(&first, 4 * kMiB, &prop, 0));
  E2E_OK(cuMemCreate(&second, 2 * kMiB, &prop, 0));  // never released
  E2E_OK(cuMemAddressReserve(&va, 8 * kMiB, 0, 0, 0));
  E2E_OK(cuMemMap(va, 4 * kMiB, 0, first, 0));
  E2E_OK(cuMemMap(va + 4 * kMiB, 2 * kMiB, 0, second, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  E2E_OK(cuMemSetAccess(va, 6 * kMiB, &access, 1));
  E2E_OK(cuMemUnmap(va, 6 * kMiB));
  E2E_OK(cuMemRelease(first));
  E2E_OK(cuMemAddressFree(va, 8 * kMiB));

  CUdeviceptr x, y;
  E2E_OK(alloc_from_resolver(&x, 1 * kMiB));
  E2E_OK(cuMemAlloc_v2(&y, 3 * kMiB));  // never freed
  E2E_OK(free_from_resolver(x));
  return 0;
}
