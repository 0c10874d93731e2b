// Loads the libc10.so named by argv[1] with dlopen(RTLD_LOCAL), as Python loads torch, then makes a known
// cudaMalloc/cudaFree sequence on device 0 through libcudart.so.13, sleeping argv[2] milliseconds after
// the first allocation and after the load so that memtrace's writer thread (MEMTRACE_FLUSH_MS) runs in
// between and sees libc10.so appear. Prints, as the last line, a JSON object saying whether that
// libc10.so exports c10::reportMemoryUsageToProfiler with the signature memtrace knows, so the checker
// can tell a broken test setup from a memtrace failure.
// Expected figures are worked out in check_torch_hook_missing.py / check_torch_hook_present.py.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <time.h>

#include <cstdlib>

#include "e2e_util.h"

namespace {

void sleep_ms(long ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&t, &t) != 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PATH_TO_LIBC10_SO SLEEP_MS\n", argv[0]);
    return 2;
  }
  const long pause_ms = std::atol(argv[2]);
  void *a, *b, *c;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaMalloc(&a, 4 * kMiB));  // memtrace starts here, before libc10.so is loaded
  sleep_ms(pause_ms);

  void* c10 = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!c10) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 3;
  }
  const bool exports_hook = dlsym(c10, "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE") != nullptr;

  E2E_OK(cudaMalloc(&b, 8 * kMiB));  // the peak
  sleep_ms(pause_ms);
  E2E_OK(cudaFree(a));
  E2E_OK(cudaMalloc(&c, 2 * kMiB));  // live at exit
  E2E_OK(cudaFree(b));
  E2E_OK(cudaDeviceSynchronize());
  std::printf("{\"exports_hook\": %s, \"live_at_exit\": \"%p\"}\n", exports_hook ? "true" : "false", c);
  return 0;
}
