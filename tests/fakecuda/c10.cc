// The fake libc10.so: the profiler hooks PyTorch's caching allocator reports to, which here only count
// their calls, so a test can prove that a library interposing them still forwarded every call.
#include <atomic>

#include "c10_profiler_hooks.h"

namespace {
std::atomic<uint64_t> g_memory_usage_calls{0};
std::atomic<uint64_t> g_out_of_memory_calls{0};
std::atomic<int64_t> g_net_alloc_bytes{0};
}  // namespace

namespace c10 {

void reportMemoryUsageToProfiler(void*, int64_t alloc_size, size_t, size_t, Device) {
  g_memory_usage_calls.fetch_add(1);
  g_net_alloc_bytes.fetch_add(alloc_size);
}

void reportOutOfMemoryToProfiler(int64_t, size_t, size_t, Device) { g_out_of_memory_calls.fetch_add(1); }

}  // namespace c10

extern "C" FakeC10Counters fake_c10_counters() {
  return FakeC10Counters{g_memory_usage_calls.load(), g_out_of_memory_calls.load(), g_net_alloc_bytes.load()};
}
