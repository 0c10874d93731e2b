// A driver-API program (linked with -lcuda, no runtime) that looks cuMemAlloc up by calling cuGetProcAddress
// by name, after first looking cuGetProcAddress_v2 up in the global scope (dlsym(dlopen(NULL)), what
// ctypes.CDLL(None).cuGetProcAddress_v2 does): that lookup finds the tracer's own export, which must not be
// taken for the driver's function. Then one allocation through each ABI's lookup, each freed at once.
#include <cuda.h>
#include <dlfcn.h>

#include "e2e_util.h"

// cuda.h maps the name to the 12.0 ABI (cuGetProcAddress_v2); the plain name is the 4-argument one.
#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);

int main() {
  E2E_OK(cuInit(0));
  CUcontext context;
  E2E_OK(cuDevicePrimaryCtxRetain(&context, 0));
  E2E_OK(cuCtxSetCurrent(context));
  void* global_scope = dlopen(nullptr, RTLD_NOW);
  if (!global_scope || !dlsym(global_scope, "cuGetProcAddress_v2") || !dlsym(global_scope, "cuGetProcAddress"))
    return 3;

  decltype(&::cuMemAlloc_v2) alloc = nullptr;
  CUdriverProcAddressQueryResult found;
  CUdeviceptr device_memory = 0;
  E2E_OK(
      cuGetProcAddress_v2("cuMemAlloc", reinterpret_cast<void**>(&alloc), 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  E2E_OK(alloc(&device_memory, kMiB));
  E2E_OK(cuMemFree(device_memory));

  alloc = nullptr;
  E2E_OK(cuGetProcAddress("cuMemAlloc", reinterpret_cast<void**>(&alloc), 3020, 0));
  E2E_OK(alloc(&device_memory, 2 * kMiB));
  E2E_OK(cuMemFree(device_memory));
  return 0;
}
