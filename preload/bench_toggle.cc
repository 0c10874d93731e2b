// See bench_toggle.h. Compiled only into libmemtrace-bench-toggle.so.
#include "bench_toggle.h"

namespace memtrace::bench_toggle {
std::atomic<bool> g_recording{true};
}  // namespace memtrace::bench_toggle

// memtrace_bench_set_recording(on): 0 stops recording (the hooks only forward) until it is called with a
// non-zero `on`, which records again. C linkage and exported, so that a benchmark finds it in the global scope
// (dlsym(RTLD_DEFAULT, ...), Python's ctypes.CDLL(None)). Safe from any thread at any time: one relaxed store,
// seen by each hook at its next event.
extern "C" __attribute__((visibility("default"))) void memtrace_bench_set_recording(int on) {
  memtrace::bench_toggle::g_recording.store(on != 0, std::memory_order_relaxed);
}
