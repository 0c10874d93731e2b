// PyTorch's CPU allocators report through the same hook as its CUDA allocator (measured on the H200:
// DataLoader workers' shared-memory tensors call c10::reportMemoryUsageToProfiler with a CPU device).
// This program loads the fake libc10.so with dlopen(RTLD_LOCAL), as Python loads torch, and reports
// three CPU blocks (alloc 4096, alloc 8192, free 4096) through the hook that a traced process binds:
// memtrace's, found first in the symbol search order. It never calls CUDA.
// Expected: no trace file (host memory is not recorded and starts nothing), and all 3 reports forwarded
// to libc10.so, whose counters the program prints as JSON.
#include <dlfcn.h>

#include "../../fakecuda/c10_profiler_hooks.h"
#include "e2e_util.h"

int main() {
  void* c10 = dlopen("libc10.so", RTLD_NOW | RTLD_LOCAL);
  if (!c10) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 3;
  }
  using Report = void (*)(void*, int64_t, size_t, size_t, c10::Device);
  // RTLD_DEFAULT: the definition a library linked against libc10.so would bind (memtrace's, when preloaded).
  auto report = reinterpret_cast<Report>(dlsym(RTLD_DEFAULT, "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"));
  auto counters = reinterpret_cast<decltype(&fake_c10_counters)>(dlsym(c10, "fake_c10_counters"));
  if (!counters) return 3;
  if (!report) report = reinterpret_cast<Report>(dlsym(c10, "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"));
  const c10::Device cpu{c10::DeviceType::CPU, -1};
  static char block_a[4096], block_b[8192];
  report(block_a, 4096, 4096, 0, cpu);
  report(block_b, 8192, 12288, 0, cpu);
  report(block_a, -4096, 8192, 0, cpu);
  FakeC10Counters c = counters();
  std::printf("{\"memory_usage_calls\": %llu, \"net_alloc_bytes\": %lld}\n",
              static_cast<unsigned long long>(c.memory_usage_calls), static_cast<long long>(c.net_alloc_bytes));
  return 0;
}
