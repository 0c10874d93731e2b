// The recorder's state, shared by the files of record/ only: recorder.cc (the hot path: events and the
// records they bring), trace_records.cc (the other records, chunks, the end-of-trace line) and lifecycle.cc
// (start, flush, finish, fork, exit). Defined in recorder.cc. Nothing outside record/ includes this.
//
// Why the state every event touches is grouped in cache-line-aligned structs: in a training loop about 128 us
// of the job's own work (kernel launches, Python) pass between two events and evict the tracer's data from L1
// and L2, so each distinct line an event touches is a trip to L3. Scattered, the recorder's globals made an
// event touch about a dozen lines of its own; grouped, they are one read-mostly line, read before the stack
// is captured, and two written lines (plus the encoder's), which record_event prefetches before it unwinds
// (prefetch_event_state), so that the locked section finds them in L1. Aligned, they share no line with what
// the writer thread writes (the flush lock, the writer). The names below are the ones the record files use:
// constexpr references into the structs, folded to direct accesses by the compiler. The structs are
// constinit, set before any code runs: a hook may run in another library's constructor, before ours.
#pragma once
#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "record/config.h"
#include "record/event_encoder.h"
#include "record/lifecycle.h"
#include "record/proto_writer.h"
#include "record/recorder.h"
#include "record/tls.h"
#include "record/trace_writer.h"
#include "stacks/intern_table.h"
#include "stacks/python_frames.h"

namespace memtrace {

// Read on every event, written only at start, fork, exit and the first sight of Python finalizing.
struct alignas(64) ReadMostlyState {
  std::atomic<TraceState> state{kNotStarted};  // written by lifecycle.cc's transitions only
  std::atomic<bool> python_ready{false};
  bool finalizing_marked = false;  // written under g_lock
  // Bumped in a forked child so that every thread announces its name again in the child's new trace.
  std::atomic<uint32_t> generation{1};
  // The process started dormant (or was injected): record_event keeps the live set while the trace runs too,
  // under g_lock (lifecycle.cc: note_live_set_locked), so that a detach returns to an exact set. Set before the
  // first transition out of kNotStarted and never cleared: a MEMTRACE_START=now trace never takes its branch.
  bool keep_live_set = false;
};
extern ReadMostlyState g_read_mostly;
inline constexpr std::atomic<TraceState>& g_state = g_read_mostly.state;
inline constexpr std::atomic<bool>& g_python_ready = g_read_mostly.python_ready;
inline constexpr bool& g_finalizing_marked = g_read_mostly.finalizing_marked;
inline constexpr std::atomic<uint32_t>& g_generation = g_read_mostly.generation;
inline constexpr bool& g_keep_live_set = g_read_mostly.keep_live_set;

extern pthread_mutex_t g_start_lock;  // held while the trace starts (lifecycle.cc)
extern Config g_config;

struct ChunkBuffer {
  uint8_t* data;
  size_t size;
};

// g_lock guards everything in EventState and the intern tables. It is a leaf lock: nothing that takes
// another lock (the loader's, the allocator's) is ever called while it is held, and it is never held while
// unwinding. It shares its line with the fields every event writes: the line is taken once for both.
struct alignas(64) EventState {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  int active = 0;  // the buffer filling
  bool wake_sent = false;
  bool end_written = false;
  uint64_t events = 0;
  // Where the next record goes in the filling buffer, as of the last append: read without the lock, only
  // to prefetch that line before unwinding (a stale value costs a useless prefetch, nothing else).
  std::atomic<uint8_t*> append_hint{nullptr};
  ChunkBuffer buffers[2] = {};
  uint64_t dropped = 0;
  uint64_t stackless = 0;  // events recorded without their stack because an intern table was full
};
extern EventState g_event_state;
inline constexpr pthread_mutex_t& g_lock = g_event_state.lock;
inline constexpr ChunkBuffer (&g_buffers)[2] = g_event_state.buffers;
inline constexpr int& g_active = g_event_state.active;
inline constexpr bool& g_wake_sent = g_event_state.wake_sent;
inline constexpr bool& g_end_written = g_event_state.end_written;
inline constexpr uint64_t& g_events = g_event_state.events;
inline constexpr uint64_t& g_dropped = g_event_state.dropped;
inline constexpr uint64_t& g_stackless = g_event_state.stackless;
inline constexpr std::atomic<uint8_t*>& g_append_hint = g_event_state.append_hint;

extern EventEncoder g_encoder;  // what the next Event / TraceEnd is encoded against
extern InternTable g_stacks;
extern RecentIds<4096> g_recent_stacks;  // in front of g_stacks
extern InternTable g_python_frames;
extern InternTable g_range_names;  // NVTX range names (RangeName records), keyed by a hash of the text
extern uint64_t g_start_ns;

// g_flush_lock serializes flushes (writer thread, exit, fork) and guards the writer and the notices.
extern pthread_mutex_t g_flush_lock;
// g_module_lock serializes writing Module records (module_map.cc's table of what was written, emit_module's
// buffer): the writer thread's flush does, and so does a hook about to write a new stack. Taken after
// g_flush_lock where both are, never with g_lock held (emit_module takes g_lock inside it).
extern pthread_mutex_t g_module_lock;
extern bool g_modules_arrived;  // objects were loaded or unloaded since the flush last looked (g_module_lock)
extern TraceWriter g_writer;
extern uint64_t g_dropped_reported;
extern uint64_t g_stackless_reported;
extern bool g_torch_checked;
extern bool g_python_notice_written;  // the notice written at start counts too (set there)
extern std::atomic<bool> g_exited;
extern pid_t g_trace_pid;        // the process whose trace this is (a vfork child shares our memory)
extern char g_trace_path[4096];  // the file actually created (maybe with a .N suffix)

extern PythonSupport g_python_support;
// PY_VERSION_HEX of the interpreter whose frames are read, once g_python_support is kSupported. Kept here, and
// across fork like g_python_support, because detection runs once per process image: a forked child that starts
// its own trace finds Python already detected and must still name its version in its TraceStart.
extern uint32_t g_python_hex;

extern MEMTRACE_TLS uint32_t t_tid;
extern MEMTRACE_TLS bool t_holds_lock;  // this thread holds g_lock in record_event: a fatal signal must not wait for it
// This thread is the writer or the exit path, recording device samples: with both buffers full it must not
// wait for room (MEMTRACE_FULL_BUFFER=wait), since nobody else would make any.
extern MEMTRACE_TLS bool t_never_waits;

// The hot path's check: true when tracing runs, starting the trace at the first event (start_trace_once,
// lifecycle.cc). One acquire load once it runs.
// In kDormant false: record_event keeps the live set through record_event_not_running() instead.
inline bool trace_running() {
  const TraceState state = g_state.load(std::memory_order_acquire);
  if (state == kRunning) return true;
  if (state == kOff || state == kDormant) return false;
  return start_trace_once();
}

// ---- dormant mode and attach (lifecycle.cc) -------------------------------------------------------------------

// record_event's path when the state is not kRunning (never on a running trace's hot path): starts the trace
// (kNotStarted), or, in kDormant, applies `e` to the live set and nothing else. True when the event is to be
// recorded (the trace runs now).
bool record_event_not_running(const MemoryEvent& e);
// Under g_lock, in record_event's locked section when g_keep_live_set: applies `e` to the live set (and to the
// attach window while one is open). False when the trace stopped running meanwhile (a detach): the event is
// then not appended, only noted.
bool note_live_set_locked(const MemoryEvent& e);

// What the TraceStart of an attach says (memtrace.proto: TraceStart.origin ...); trace_records.cc writes them.
struct AttachStart {
  TraceOrigin origin = TraceOrigin::kLaunch;
  uint32_t attach_number = 0;
  bool driver_layer = false;
  bool torch_layer = false;
};
extern AttachStart g_attach_start;

// CLOCK_MONOTONIC in ns.
uint64_t now_ns();

// ---- records (recorder.cc; g_lock held) ---------------------------------------------------------------------

// Appends one length-delimited Record whose oneof member `kind` is the encoded message `inner`.
// All or nothing: returns false, writing nothing, when the active buffer has no room.
// Static, defined here: each file gets its own copy, so that the compiler specializes recorder.cc's for its
// callers on the hot path (all kinds below 16: a one-byte key) as when the recorder was one file. An
// external definition cost 7 instructions an event (bench/hot_path_callgrind).
[[maybe_unused]] static bool append_record_locked(uint32_t kind, const ProtoWriter& inner) {
  if (!inner.ok()) return false;
  size_t body =
      ProtoWriter::varint_size(uint64_t{kind} << 3 | 2) + ProtoWriter::varint_size(inner.size()) + inner.size();
  size_t total = ProtoWriter::varint_size(body) + body;
  ChunkBuffer& b = g_buffers[g_active];
  if (b.size + total > g_config.buffer_bytes) return false;
  ProtoWriter out(b.data + b.size, b.data + b.size + total);
  out.raw_varint(body);
  out.message(kind, inner);
  // The bytes before the size: a fatal-signal handler on this thread writes the buffer up to b.size.
  std::atomic_signal_fence(std::memory_order_release);
  b.size += out.size();
  g_append_hint.store(b.data + b.size, std::memory_order_relaxed);
  return true;
}
// A Notice record; `message` is cut to 512 bytes at a UTF-8 boundary.
bool append_notice_locked(NoticeCode code, const char* message, uint64_t count);
// The length of the longest prefix of `s` (`len` bytes) that is at most `max` bytes and does not end
// inside a UTF-8 sequence: the analyzer's protobuf runtime rejects a string field that is not UTF-8.
size_t utf8_prefix(const char* s, size_t len, size_t max);

// ---- other records and chunks (trace_records.cc) ---------------------------------------------------------

// The TraceStart record (g_lock held), with g_attach_start's fields; `python_hex`: PY_VERSION_HEX of the Python whose
// frames are read, 0 none.
void append_start_locked(uint32_t python_hex);
// The notice that Python frames are not recorded, with the reason (g_lock held).
void append_python_unsupported_locked();
// Python may be absent at start and appear later (a C++ program that embeds it): detection is retried
// from the writer thread, when new modules appear, until it gives a definite answer.
void detect_python();
// Swaps the buffers and writes the one that was filling as a chunk. g_flush_lock held; g_lock taken here unless
// the caller (a fatal-signal handler on a thread that was inside the recorder) already holds it.
void write_active_buffer(bool g_lock_held = false);
// Writes the filling buffer as one chunk and appends the pending metadata after it. g_flush_lock held. A no-op
// unless tracing runs or `final_flush`.
void flush_locked_flush(bool final_flush);
// Modules loaded since the last flush (and what their arrival tells: Python, PyTorch's hook), and the count
// of dropped events. Written before a TraceEnd; a hook writes the modules a new stack may refer to itself
// (record_event), so that this finds them already written.
void append_pending_metadata();
// Writes the Module records of the objects loaded since the last call (module_map.h). g_module_lock held, g_lock
// not (dl_iterate_phdr takes the loader's lock; emit_module takes g_lock).
void emit_new_modules_locked();
// The TraceEnd record (g_lock held).
void append_end_locked(EndHow how, int signal);
// Writes the TraceEnd and the last chunk; g_flush_lock is held by the caller. False when the trace had its
// TraceEnd already (the end-of-trace line was printed then).
bool finish_locked(EndHow how, int signal);
// Writes a line of ours to stderr with SIGPIPE blocked (why: trace_records.cc). Async-signal-safe.
void write_to_stderr(const char* text, size_t size);
// "memtrace: wrote PATH (N events, B bytes)" once a trace has its TraceEnd, unless writing failed on the way.
// Async-signal-safe; g_flush_lock held.
void print_end_line_if_written();
// The same line for a trace that ended by detach or snapshot (the state is kDormant by then). g_flush_lock held.
void print_end_line_after_detach();

// ---- lifecycle (lifecycle.cc) -------------------------------------------------------------------------------

// Writing the trace failed: says so on stderr and stops tracing (kWriteFailed).
void report_write_failure();

}  // namespace memtrace
