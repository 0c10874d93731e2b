// The trace's life in this process, as a state machine (lifecycle.cc): when it starts (the first recorded
// event), how it is flushed (the writer thread), and how it ends (exit, _exit, exec, a fatal signal) or begins
// anew (a forked child). The process hooks (hooks/process_hooks.cc) call the ending functions below; the
// recorder's hot path calls trace_running().
//
// States and transitions (TraceState, LifecycleEvent):
//
//   kNotStarted --kStarted--------> kRunning      the first event: settings read, file created, writer started
//   kNotStarted --kStartFailed----> kOff          no file, no memory, or a set-uid program (left alone)
//   kRunning    --kEnded----------> kOff          _exit, exec: TraceEnd written, nothing recorded after it
//   kRunning    --kWriteFailed----> kOff          the file could not be written: what came before stays
//   kOff        --kExecFailed-----> kRunning      an exec that failed returns to the program: tracing resumes
//   kRunning    --kForked---------> kNotStarted   a forked child starts its own trace at its first event
//
// The atexit handler, the library destructor and a fatal signal write a TraceEnd without leaving kRunning:
// events after them (static destructors freeing memory, a program handler that recovers) are still recorded.
//
// Attach (docs/attach.md; the control endpoint is preload/attach/control_server.h):
//
//   kNotStarted --kStartedDormant-> kDormant      MEMTRACE_START=dormant at the first event, or the tracer was
//                                                 loaded into a running process (injected): no file, no stacks
//   kDormant    --kAttached-------> kRunning      `memtrace attach`: the trace opens with what is live now
//   kRunning    --kDetached-------> kDormant      `memtrace detach`: TraceEnd (DETACH), the file is complete
//   kDormant    --kForked---------> kNotStarted   a forked child starts dormant again at its first event
//
// In kDormant a preloaded tracer keeps the live set only (preload/attach/live_set.h); an injected one sees no
// event at all (its sources are off until attach).
#pragma once
#include <atomic>
#include <cstdint>

#include "record/schema.h"

namespace memtrace {

enum TraceState : int { kNotStarted = 0, kRunning = 1, kOff = 2, kDormant = 3 };

enum class LifecycleEvent : uint8_t {
  kStarted,
  kStartFailed,
  kEnded,
  kWriteFailed,
  kExecFailed,
  kForked,
  kStartedDormant,
  kAttached,
  kDetached
};

// The state `from` moves to on `event`; `from` itself where the event does not apply to it.
constexpr TraceState next_state(TraceState from, LifecycleEvent event) {
  switch (event) {
    case LifecycleEvent::kStarted: return from == kNotStarted ? kRunning : from;
    case LifecycleEvent::kStartFailed: return from == kNotStarted ? kOff : from;
    case LifecycleEvent::kEnded: return kOff;
    case LifecycleEvent::kWriteFailed: return kOff;
    case LifecycleEvent::kExecFailed: return from == kOff ? kRunning : from;
    case LifecycleEvent::kForked: return from == kRunning || from == kDormant ? kNotStarted : from;
    case LifecycleEvent::kStartedDormant: return from == kNotStarted ? kDormant : from;
    case LifecycleEvent::kAttached: return from == kDormant ? kRunning : from;
    case LifecycleEvent::kDetached: return from == kRunning ? kDormant : from;
  }
  return from;
}

// Starts the trace unless it started (or failed to) before: the slow path of trace_running(). Thread-safe;
// one thread starts it, the others wait for the result. True when tracing runs.
bool start_trace_once();

// Writes everything buffered so far as one chunk (the writer thread calls this every flush interval).
void recorder_flush();

// How the traced process ended (TraceEnd.How in memtrace.proto).
enum class EndHow : uint8_t { kExit = 0, kUnderscoreExit = 1, kSignal = 2, kExec = 3, kDetach = 4, kSnapshotDone = 5 };

// Writes what is buffered and the TraceEnd record, and stops tracing (kEnded): the process is about to end
// without atexit (_exit) or be replaced (exec). A no-op unless this very process is tracing (a vfork child
// shares our memory but not our trace).
void recorder_finish(EndHow how);

// The same from a signal handler: takes the locks only if they come free within a bounded wait (else writes
// nothing), and writes under the lock this thread already held if the signal came while it was inside the
// recorder. `process_dies`: the handler is about to give the signal its default action (or exit), so nothing
// may be written after the TraceEnd; false where a program handler runs next and may recover. `how`: kSignal
// with `signal`, or kUnderscoreExit for a program's handler that calls _exit().
void recorder_finish_from_signal(int signal, bool process_dies, EndHow how = EndHow::kSignal);

// True once the process has begun exiting (our atexit handler ran): frees after this are teardown frees.
bool recorder_exit_begun();

// From a fatal signal's handler when the program has a handler of its own, which may recover: writes what is
// buffered, and the trace goes on.
void recorder_flush_from_signal();

// An exec that failed returns to the program: tracing resumes (kExecFailed; the file gets a second TraceEnd
// later).
void recorder_resume_after_exec_failure();

// ---- attach (the control thread, preload/attach/control_server.cc, calls these; one at a time) -----------------

// What an attach, detach or snapshot did: `path` the trace file, else `error` a one-line message for the user.
struct AttachOutcome {
  bool ok = false;
  char path[4096] = {};
  char error[512] = {};
};

// kDormant -> kRunning: creates the trace from `output_pattern` (MEMTRACE_OUTPUT's placeholders; empty: the
// process's MEMTRACE_OUTPUT, else the default), TraceStart with `origin` (kAttachDormant or kAttachInjected), then
// what is live now as LiveAtAttach records and per device an AttachBaseline, then every event from then on.
// Nothing is lost or counted twice across the switch (docs/attach.md: how). Injected: turns the event sources on
// first (preload/attach/injected_sources.h).
void recorder_attach(const char* output_pattern, TraceOrigin origin, AttachOutcome* out);

// kRunning -> kDormant: writes what is buffered and the TraceEnd (DETACH), closes the file, stops the writer
// thread. Injected: turns the event sources off and restores what they patched.
void recorder_detach(AttachOutcome* out);

// In kDormant: writes a trace of its own holding the live set only (TraceStart SNAPSHOT, LiveAtAttach records,
// AttachBaseline, TraceEnd SNAPSHOT_DONE) and stays dormant.
void recorder_snapshot(const char* output_pattern, AttachOutcome* out);

// For the endpoint's `status`: whether a trace runs now, and its file (`path`, `size` bytes) when it does.
bool recorder_status(char* path, size_t size);

// The tracer was loaded into a running process (control_server.cc's constructor found the inject request):
// kNotStarted -> kDormant without a live set (nothing is interposed there; the sources turn on at attach). False
// when the state had left kNotStarted already, or the program is set-uid.
bool recorder_start_injected();

}  // namespace memtrace
