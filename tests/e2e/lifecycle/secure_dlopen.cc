// A set-gid process (getauxval(AT_SECURE) = 1) with memtrace loaded: the tracer must do nothing at all.
// The loader ignores LD_PRELOAD paths in such a process, so this program loads the library itself:
// dlopen(LIBMEMTRACE, RTLD_NOW | RTLD_GLOBAL), then calls cudaMalloc (4 MiB) and cudaFree through the
// library's own entry points (dlsym on its handle), which forward to the CUDA runtime.
// Usage: e2e_secure_dlopen LIBMEMTRACE LIBCUDA. Prints "AT_SECURE=N" first. The loader drops
// LD_LIBRARY_PATH in a secure process: the runtime is found through the program's RPATH, and the driver
// (which the runtime dlopen()s by its SONAME) is loaded by its full path LIBCUDA, after the tracer.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/auxv.h>

#include "e2e_util.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  std::printf("AT_SECURE=%lu\n", getauxval(AT_SECURE));
  void* unused = nullptr;
  E2E_OK(cudaMalloc(&unused, 0));  // links the runtime in, as a CUDA job has it (0 bytes: no driver call)
  void* tracer = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!tracer) {
    std::printf("dlopen: %s\n", dlerror());
    return 4;
  }
  if (!dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) {
    std::printf("dlopen: %s\n", dlerror());
    return 4;
  }
  auto traced_malloc = reinterpret_cast<decltype(&cudaMalloc)>(dlsym(tracer, "cudaMalloc"));
  auto traced_free = reinterpret_cast<decltype(&cudaFree)>(dlsym(tracer, "cudaFree"));
  if (!traced_malloc || !traced_free) return 4;
  void* p = nullptr;
  E2E_OK(traced_malloc(&p, 4 * kMiB));
  E2E_OK(traced_free(p));
  return 0;
}
