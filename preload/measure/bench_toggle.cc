// See bench_toggle.h. Compiled only into libmemtrace-bench-toggle.so.
#include "measure/bench_toggle.h"

namespace memtrace::bench_toggle {
std::atomic<bool> g_recording{true};
std::atomic<int> g_max_native_frames_python{-1};
}  // namespace memtrace::bench_toggle

// memtrace_bench_set_recording(on): 0 stops recording (the hooks only forward) until it is called with a
// non-zero `on`, which records again. C linkage and exported, so that a benchmark finds it in the global scope
// (dlsym(RTLD_DEFAULT, ...), Python's ctypes.CDLL(None)). Safe from any thread at any time: one relaxed store,
// seen by each hook at its next event.
extern "C" __attribute__((visibility("default"))) void memtrace_bench_set_recording(int on) {
  memtrace::bench_toggle::g_recording.store(on != 0, std::memory_order_relaxed);
}

// memtrace_bench_set_max_frames_python(frames): native frames kept on threads with Python frames from the next
// event on, 0 to 256 (larger is taken as 256); a negative `frames` goes back to the configured depth
// (MEMTRACE_MAX_FRAMES_PYTHON). Exported and thread-safe as above.
extern "C" __attribute__((visibility("default"))) void memtrace_bench_set_max_frames_python(int frames) {
  memtrace::bench_toggle::g_max_native_frames_python.store(frames > 256 ? 256 : frames, std::memory_order_relaxed);
}
