// Test-only entry points to the injected tracer's sources (injected_sources.h), built into
// libmemtrace-injected-test.so only (preload/CMakeLists.txt: MEMTRACE_EXTRA_EXPORTS), never into libmemtrace.so:
// a test program loads that library with dlopen after its own CUDA calls and switches the sources itself, without
// the control endpoint and the lifecycle (tests/e2e/injected).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "attach/got_patch.h"
#include "attach/injected_sources.h"
#include "hooks/export.h"

using namespace memtrace;

namespace {

// Appends one line to the caller's buffer.
struct Lines {
  char* out;
  size_t size;
  size_t used;
};

void append(Lines* lines, const char* text) {
  if (lines->used + 1 >= lines->size) return;
  int n = snprintf(lines->out + lines->used, lines->size - lines->used, "%s\n", text);
  if (n > 0) lines->used += static_cast<size_t>(n) < lines->size - lines->used ? static_cast<size_t>(n) : 0;
}

void on_live(const LiveEntry& e, void* context) {
  char line[256];
  snprintf(line, sizeof line,
           "live layer=%d api=%d device=%d address=%llu size=%llu stream=%llu unknown=%d expandable=%d",
           static_cast<int>(e.layer), static_cast<int>(e.api), e.device, static_cast<unsigned long long>(e.address),
           static_cast<unsigned long long>(e.size), static_cast<unsigned long long>(e.stream), e.blocks_unknown ? 1 : 0,
           e.expandable_segment ? 1 : 0);
  append(static_cast<Lines*>(context), line);
}

void on_device(const DeviceBaseline& b, void* context) {
  char line[256];
  snprintf(line, sizeof line, "device device=%d free=%llu total=%llu allocated=%llu reserved=%llu", b.device,
           static_cast<unsigned long long>(b.device_free_bytes), static_cast<unsigned long long>(b.device_total_bytes),
           static_cast<unsigned long long>(b.allocator_allocated_bytes),
           static_cast<unsigned long long>(b.allocator_reserved_bytes));
  append(static_cast<Lines*>(context), line);
}

// The pool events a test says were recorded (memtrace_test_pool_events_add), for the snapshot's bracket.
std::atomic<uint64_t> g_test_pool_events{0};

uint64_t test_pool_events(void*) { return g_test_pool_events.load(); }

}  // namespace

// Counts `n` more pool events, as the recorder would for cudaMallocAsync/cudaFreeAsync calls.
extern "C" MEMTRACE_EXPORT void memtrace_test_pool_events_add(uint64_t n) { g_test_pool_events.fetch_add(n); }

// injected_sources_enable: bit 0 the driver layer, bit 1 the torch layer, bit 2 CUPTI busy; `why` its why_not.
extern "C" MEMTRACE_EXPORT int memtrace_test_injected_enable(char* why, size_t why_size) {
  InjectedSources sources;
  injected_sources_enable(&sources);
  snprintf(why, why_size, "%s", sources.why_not);
  return (sources.driver_layer ? 1 : 0) | (sources.torch_layer ? 2 : 0) | (sources.cupti_busy ? 4 : 0);
}

extern "C" MEMTRACE_EXPORT void memtrace_test_injected_disable() { injected_sources_disable(); }

// injected_live_list, its entries and baselines written as lines into `out` (`out_size` bytes, NUL-terminated).
extern "C" MEMTRACE_EXPORT int memtrace_test_injected_live_list(char* out, size_t out_size, char* why,
                                                                size_t why_size) {
  Lines lines{out, out_size, 0};
  if (out_size) out[0] = '\0';
  return injected_live_list(on_live, on_device, test_pool_events, &lines, why, why_size) ? 1 : 0;
}
