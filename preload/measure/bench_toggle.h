// Recording switched off and on at run time inside one process, to measure what recording costs a job: a
// benchmark alternates blocks of steps with and without it, so that the GPU machine's drift from process to
// process (tens of percent, docs/performance.md) falls on both alike. Only in libmemtrace-bench-toggle.so (CMake
// target memtrace_preload_bench_toggle, built with the tests or with MEMTRACE_BENCH_TOGGLE); in libmemtrace.so
// the check compiles to nothing. scripts/gpu-toggle-bench uses it.
//
// While recording is off every hook still runs and forwards, and record_event() returns at its first line: the
// difference measured is recording's cost over an interposed hook's (the hook alone is about 35-60 ns an event on
// the GPU machine, docs/performance.md). An allocation made while on and freed while off keeps its free out of
// the trace: a toggled trace is for measuring, not for reading.
//
// The same library can also switch the native depth kept on threads with Python frames (the setting of
// MEMTRACE_MAX_FRAMES_PYTHON), so that two depths are compared inside one process as well.
#pragma once

#ifdef MEMTRACE_BENCH_TOGGLE
#include <atomic>
namespace memtrace::bench_toggle {
extern std::atomic<bool> g_recording;                // true at start
extern std::atomic<int> g_max_native_frames_python;  // -1 at start: the configured depth
}  // namespace memtrace::bench_toggle
#define MEMTRACE_BENCH_RECORDING() ::memtrace::bench_toggle::g_recording.load(std::memory_order_relaxed)
namespace memtrace::bench_toggle {
// The depth asked for with memtrace_bench_set_max_frames_python, else `configured`: one load, so that a switch
// between two loads cannot hand on the -1 that means "not set".
inline int max_native_frames_python(int configured) {
  int asked = g_max_native_frames_python.load(std::memory_order_relaxed);
  return asked >= 0 ? asked : configured;
}
}  // namespace memtrace::bench_toggle
#define MEMTRACE_BENCH_MAX_NATIVE_FRAMES_PYTHON(configured) \
  ::memtrace::bench_toggle::max_native_frames_python(configured)
#else
#define MEMTRACE_BENCH_RECORDING() true
#define MEMTRACE_BENCH_MAX_NATIVE_FRAMES_PYTHON(configured) (configured)
#endif
