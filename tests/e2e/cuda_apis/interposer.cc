// Another tool preloaded next to memtrace that interposes the same functions and forwards with
// dlsym(RTLD_NEXT), as many tools do. It counts the calls it saw and, at unload, appends
// "interposer: cudaMalloc N cudaFree M cuMemAlloc_v2 K cuMemFree_v2 L" to the file named by
// $E2E_INTERPOSER_REPORT.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<int> g_mallocs{0};
std::atomic<int> g_frees{0};
std::atomic<int> g_driver_allocs{0};
std::atomic<int> g_driver_frees{0};

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

__attribute__((destructor)) void report() {
  const char* path = std::getenv("E2E_INTERPOSER_REPORT");
  if (!path) return;
  char line[160];
  int n = std::snprintf(line, sizeof line, "interposer: cudaMalloc %d cudaFree %d cuMemAlloc_v2 %d cuMemFree_v2 %d\n",
                        g_mallocs.load(), g_frees.load(), g_driver_allocs.load(), g_driver_frees.load());
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  if (write(fd, line, static_cast<size_t>(n)) < 0) {
  }
  close(fd);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void** pointer, size_t size) {
  static auto real = next<cudaError_t (*)(void**, size_t)>("cudaMalloc");
  g_mallocs++;
  return real ? real(pointer, size) : cudaErrorUnknown;
}

__attribute__((visibility("default"))) cudaError_t cudaFree(void* pointer) {
  static auto real = next<cudaError_t (*)(void*)>("cudaFree");
  g_frees++;
  return real ? real(pointer) : cudaErrorUnknown;
}

__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t size) {
  static auto real = next<CUresult (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  g_driver_allocs++;
  return real ? real(pointer, size) : CUDA_ERROR_UNKNOWN;
}

__attribute__((visibility("default"))) CUresult cuMemFree_v2(CUdeviceptr pointer) {
  static auto real = next<CUresult (*)(CUdeviceptr)>("cuMemFree_v2");
  g_driver_frees++;
  return real ? real(pointer) : CUDA_ERROR_UNKNOWN;
}

}  // extern "C"
