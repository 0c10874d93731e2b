// Cycle counts of the PyTorch block event path, phase by phase, for finding where an event's cost goes on a
// machine without perf or a PMU (the GPU machine's VM has neither). Built only with the CMake option
// MEMTRACE_PHASE_CYCLES (off by default: the marks compile to nothing); scripts/gpu-phase-cycles uses it.
//
// Only the PyTorch hook's events are counted, from its entry (kEnter) to its return (kForwarded): each mark
// reads the time-stamp counter and adds the cycles since the thread's previous mark to its phase's sum. A mark
// costs about 20 ns (an rdtsc on these virtual machines), which every phase's figure includes. The report,
// written to stderr at exit, gives each phase's mean per event over every thread, and the cycles between one
// event's return and the next one's entry ("outside": the job's own work between two events, which a tracer
// that evicted the job's code and data from the caches would make dearer). Each thread adds into a slot of its
// own, so that no lock or atomic disturbs what is measured.
//
// MEMTRACE_PHASE_SKIP_RECORD=1 (read once): the hook forwards without recording, to measure what being
// interposed costs by itself.
#pragma once

#ifdef MEMTRACE_PHASE_CYCLES
namespace memtrace::phase_cycles {
enum Phase : int { kEnter, kStarted, kStack, kLocked, kAppended, kUnlocked, kForwarded, kPhaseCount };
void mark(Phase phase);
void count_native_frames(int frames);  // what one unwind returned (our own frames included)
bool skip_record();
}  // namespace memtrace::phase_cycles
#define MEMTRACE_PHASE(phase) ::memtrace::phase_cycles::mark(::memtrace::phase_cycles::phase)
#define MEMTRACE_PHASE_SKIP_RECORD() ::memtrace::phase_cycles::skip_record()
#define MEMTRACE_PHASE_NATIVE_FRAMES(n) ::memtrace::phase_cycles::count_native_frames(n)
#else
#define MEMTRACE_PHASE_NATIVE_FRAMES(n) ((void)0)
#define MEMTRACE_PHASE(phase) ((void)0)
#define MEMTRACE_PHASE_SKIP_RECORD() false
#endif
