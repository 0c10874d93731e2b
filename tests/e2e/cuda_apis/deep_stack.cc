// Allocations made 60 frames below main on every kind of hook's path, so that the native stack is deeper
// than the frames the tracer keeps: the runtime (cudaMalloc), the driver linked with -lcuda (cuMemAlloc), the
// driver's cuMemAlloc as cuGetProcAddress hands it out, called by name at both of its ABIs (the resolver's
// wrapper: the path with the most tracer frames), and PyTorch's allocator layer (the fake libc10_cuda.so
// loaded as Python loads torch). Each is freed at once.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "../../fakecuda/c10_cuda_allocator.h"
#include "e2e_util.h"

// cuda.h maps the name to the 12.0 ABI (cuGetProcAddress_v2); the plain name is the 4-argument one.
#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);

namespace {

constexpr int kDepth = 60;

void allocate_on_every_path() {
  void* runtime = nullptr;
  E2E_OK(cudaMalloc(&runtime, kMiB));
  E2E_OK(cudaFree(runtime));

  CUdeviceptr driver = 0;
  E2E_OK(cuMemAlloc(&driver, kMiB));
  E2E_OK(cuMemFree(driver));

  decltype(&::cuMemAlloc_v2) alloc_from_resolver = nullptr;
  CUdriverProcAddressQueryResult found;
  E2E_OK(cuGetProcAddress_v2("cuMemAlloc", reinterpret_cast<void**>(&alloc_from_resolver), 12000,
                             CU_GET_PROC_ADDRESS_DEFAULT, &found));
  E2E_OK(alloc_from_resolver(&driver, kMiB));
  E2E_OK(cuMemFree(driver));

  alloc_from_resolver = nullptr;
  E2E_OK(cuGetProcAddress("cuMemAlloc", reinterpret_cast<void**>(&alloc_from_resolver), 3020, 0));
  E2E_OK(alloc_from_resolver(&driver, kMiB));
  E2E_OK(cuMemFree(driver));

  void* c10_cuda = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!c10_cuda) std::exit(3);
  auto malloc_block = reinterpret_cast<decltype(&fake_c10_cuda_malloc)>(dlsym(c10_cuda, "fake_c10_cuda_malloc"));
  auto free_block = reinterpret_cast<decltype(&fake_c10_cuda_free)>(dlsym(c10_cuda, "fake_c10_cuda_free"));
  if (!malloc_block || !free_block) std::exit(3);
  void* block = malloc_block(1000, 0);  // a 1024-byte block in a new 2 MiB segment (its cudaMalloc too)
  if (!block) std::exit(3);
  free_block(block);
}

// Not inlined and not a tail call (the frame pointer and -O0 of e2e programs): one frame per level.
__attribute__((noinline)) int descend(int depth) {
  if (depth == 0) {
    allocate_on_every_path();
    return 0;
  }
  return descend(depth - 1) + 1;
}

}  // namespace

int main() {
  E2E_OK(cuInit(0));
  CUcontext context;
  E2E_OK(cuDevicePrimaryCtxRetain(&context, 0));
  E2E_OK(cuCtxSetCurrent(context));
  return descend(kDepth) == kDepth ? 0 : 4;
}
