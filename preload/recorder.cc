#include "recorder.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "bench_toggle.h"
#include "config.h"
#include "device_usage.h"
#include "event_encoder.h"
#include "intern_table.h"
#include "module_map.h"
#include "phase_cycles.h"
#include "process_hooks.h"
#include "proto_writer.h"
#include "python_frames.h"
#include "stack_capture.h"
#include "tls.h"
#include "trace_writer.h"

namespace memtrace {
namespace {

// ---- state ---------------------------------------------------------------------------------------------
// Why the state every event touches is grouped in cache-line-aligned structs: in a training loop about 128 us
// of the job's own work (kernel launches, Python) pass between two events and evict the tracer's data from L1
// and L2, so each distinct line an event touches is a trip to L3. Scattered, the recorder's globals made an
// event touch about a dozen lines of its own; grouped, they are one read-mostly line, read before the stack
// is captured, and two written lines (plus the encoder's), which record_event prefetches before it unwinds
// (prefetch_event_state), so that the locked section finds them in L1. Aligned, they share no line with what
// the writer thread writes (the flush lock, the writer). The names below are the ones the rest of this file
// (and the fork handlers) use: references into the structs, folded to direct accesses by the compiler. The
// structs are constinit, set before any code runs: a hook may run in another library's constructor, before ours.
enum State : int { kNotStarted = 0, kRunning = 1, kOff = 2 };

// Read on every event, written only at start, fork, exit and the first sight of Python finalizing.
struct alignas(64) ReadMostlyState {
  std::atomic<int> state{kNotStarted};
  std::atomic<bool> python_ready{false};
  bool finalizing_marked = false;  // written under g_lock
  // Bumped in a forked child so that every thread announces its name again in the child's new trace.
  std::atomic<uint32_t> generation{1};
};
constinit ReadMostlyState g_read_mostly;
std::atomic<int>& g_state = g_read_mostly.state;
std::atomic<bool>& g_python_ready = g_read_mostly.python_ready;
bool& g_finalizing_marked = g_read_mostly.finalizing_marked;
std::atomic<uint32_t>& g_generation = g_read_mostly.generation;

pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
Config g_config;

struct ChunkBuffer {
  uint8_t* data;
  size_t size;
};

// g_lock guards everything in EventState and below it up to g_flush_lock. It is a leaf lock: nothing that
// takes another lock (the loader's, the allocator's) is ever called while it is held, and it is never held
// while unwinding. It shares its line with the fields every event writes: the line is taken once for both.
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
constinit EventState g_event_state;
pthread_mutex_t& g_lock = g_event_state.lock;
ChunkBuffer (&g_buffers)[2] = g_event_state.buffers;
int& g_active = g_event_state.active;
bool& g_wake_sent = g_event_state.wake_sent;
bool& g_end_written = g_event_state.end_written;
uint64_t& g_events = g_event_state.events;
uint64_t& g_dropped = g_event_state.dropped;
uint64_t& g_stackless = g_event_state.stackless;
std::atomic<uint8_t*>& g_append_hint = g_event_state.append_hint;

alignas(64) constinit EventEncoder g_encoder;  // what the next Event / TraceEnd is encoded against
InternTable g_stacks;
RecentIds<4096> g_recent_stacks;  // in front of g_stacks
InternTable g_python_frames;
uint64_t g_start_ns = 0;

// g_flush_lock serializes flushes (writer thread, exit, fork) and guards the writer and the notices.
pthread_mutex_t g_flush_lock = PTHREAD_MUTEX_INITIALIZER;
// g_module_lock serializes writing Module records (module_map.cc's table of what was written, emit_module's
// buffer): the writer thread's flush does, and so does a hook about to write a new stack. Taken after
// g_flush_lock where both are, never with g_lock held (emit_module takes g_lock inside it).
pthread_mutex_t g_module_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_modules_arrived = false;  // objects were loaded or unloaded since the flush last looked (g_module_lock)
TraceWriter g_writer;
uint64_t g_dropped_reported = 0;
uint64_t g_stackless_reported = 0;
bool g_torch_checked = false;
bool g_python_notice_written = false;  // the notice written at start counts too (set there)
std::atomic<bool> g_exited{false};
pid_t g_trace_pid = 0;            // the process whose trace this is (a vfork child shares our memory)
char g_trace_path[4096];          // the file actually created (maybe with a .N suffix)

PythonSupport g_python_support = PythonSupport::kAbsent;
// PY_VERSION_HEX of the interpreter whose frames are read, once g_python_support is kSupported. Kept here, and
// across fork like g_python_support, because detection runs once per process image: a forked child that starts
// its own trace finds Python already detected and must still name its version in its TraceStart.
uint32_t g_python_hex = 0;

MEMTRACE_TLS int t_hook_depth;
MEMTRACE_TLS uint32_t t_announced_generation;
MEMTRACE_TLS uint32_t t_tid;
MEMTRACE_TLS bool t_holds_lock;  // this thread holds g_lock in record_event: a fatal signal must not wait for it
// This thread is the writer or the exit path, recording device samples: with both buffers full it must not
// wait for room (MEMTRACE_FULL_BUFFER=wait), since nobody else would make any.
MEMTRACE_TLS bool t_never_waits;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t current_tid() {
  if (!t_tid) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

// ---- appending records (g_lock held) -------------------------------------------------------------------

// Appends one length-delimited Record whose oneof member `kind` is the encoded message `inner`.
// All or nothing: returns false, writing nothing, when the active buffer has no room.
bool append_record_locked(uint32_t kind, const ProtoWriter& inner) {
  if (!inner.ok()) return false;
  size_t body = ProtoWriter::varint_size(uint64_t{kind} << 3 | 2) + ProtoWriter::varint_size(inner.size()) +
                inner.size();
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

void wake_writer_if_filling_locked() {
  if (!g_wake_sent && g_buffers[g_active].size > g_config.buffer_bytes / 2) {
    g_wake_sent = true;
    g_writer.wake();
  }
}

void append_thread_info_locked() {
  char name[64] = "";
  pthread_getname_np(pthread_self(), name, sizeof name);
  uint8_t buf[128];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, current_tid());
  w.string(2, name);
  if (append_record_locked(field::kThread, w)) t_announced_generation = g_generation.load();
}

// The length of the longest prefix of `s` (`len` bytes) that is at most `max` bytes and does not end
// inside a UTF-8 sequence: the analyzer's protobuf runtime rejects a string field that is not UTF-8.
size_t utf8_prefix(const char* s, size_t len, size_t max) {
  if (len <= max) return len;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) n--;
  return n;
}

// Returns the PythonFrame id of stack->python[i], writing the record the first time it is seen; 0 if the
// record could not be written.
uint64_t intern_python_frame_locked(const CapturedStack& stack, int i) {
  uint64_t key = stack.python[i].key;
  if (uint64_t id = g_python_frames.find(key)) return id;
  if (g_python_frames.full()) return 0;  // ids are never reused: write nothing under an id we cannot keep
  const PythonFrameView& f = stack.python[i];
  uint8_t buf[2200];
  ProtoWriter w(buf, buf + sizeof buf);
  uint64_t id = g_python_frames.next_id();
  w.uint(1, id);
  w.bytes(2, f.file, utf8_prefix(f.file, f.file_len, 1024));
  w.bytes(3, f.function, utf8_prefix(f.function, f.function_len, 1024));
  w.uint(4, f.line);
  if (!append_record_locked(field::kPythonFrame, w)) return 0;
  return g_python_frames.insert(key);
}

// The Stack id of `stack` when it was written before; 0 when it was not (or no stack was captured).
uint64_t find_stack_locked(const CapturedStack& stack) {
  if (stack.frame_count == 0) return 0;
  if (uint64_t id = g_recent_stacks.find(stack.key)) return id;
  if (uint64_t id = g_stacks.find(stack.key)) {
    g_recent_stacks.remember(stack.key, id);
    return id;
  }
  return 0;
}

// Writes `stack`, not written before, (and its new Python frames) and returns its id; 0 when a table is full or
// the buffer has no room.
uint64_t write_stack_locked(const CapturedStack& stack) {
  if (g_stacks.full()) return 0;
  uint64_t frames[kMaxNativeFrames + kMaxPythonFrames];
  for (int i = 0; i < stack.frame_count; i++) {
    uint64_t f = stack.frames[i];
    if (f & kPythonFrameBit) {
      uint64_t id = intern_python_frame_locked(stack, static_cast<int>(f & ~kPythonFrameBit));
      if (!id) return 0;
      f = kPythonFrameBit | id;
    }
    frames[i] = f;
  }
  uint8_t buf[(kMaxNativeFrames + kMaxPythonFrames) * 10 + 32];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, g_stacks.next_id());
  w.packed_uints(2, frames, static_cast<size_t>(stack.frame_count));
  w.uint(3, stack.native_cut);  // written only when set: a complete stack costs no byte more
  w.uint(4, stack.python_cut);
  if (!append_record_locked(field::kStack, w)) return 0;
  uint64_t id = g_stacks.insert(stack.key);
  g_recent_stacks.remember(stack.key, id);
  return id;
}

bool append_event_locked(const MemoryEvent& e, uint64_t stack_id) {
  uint8_t buf[EventEncoder::kMaxEventBytes];
  ProtoWriter w(buf, buf + sizeof buf);
  EventEncoder::Pending p = g_encoder.encode_event(e, now_ns(), current_tid(), stack_id, w);
  if (!append_record_locked(field::kEvent, w)) return false;
  g_encoder.commit(p);
  g_events++;
  return true;
}

// An event that will not be in the trace (g_lock held).
void drop_event_locked() {
  g_dropped++;
  g_encoder.event_lost();
}

bool append_notice_locked(NoticeCode code, const char* message, uint64_t count) {
  uint8_t buf[600];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(code));
  w.bytes(2, message, utf8_prefix(message, strlen(message), 512));
  w.uint(3, count);
  return append_record_locked(field::kNotice, w);
}

// ---- start ---------------------------------------------------------------------------------------------

void append_start_locked(uint32_t python_hex) {
  static char cmdline[8192];
  size_t cmdline_size = 0;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
    cmdline_size = n > 0 ? static_cast<size_t>(n) : 0;
    close(fd);
    // A command line longer than the buffer was cut: drop a trailing partial UTF-8 sequence.
    if (cmdline_size == sizeof cmdline - 1)
      while (cmdline_size > 0 && static_cast<unsigned char>(cmdline[cmdline_size - 1]) >= 0x80) cmdline_size--;
  }
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);

  static uint8_t buf[8192 + 2048];  // the command line, the host and job id (<= 255 bytes each), the numbers
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(getpid()));
  w.uint(2, static_cast<uint64_t>(getppid()));
  w.string(3, host);
  if (g_config.redact_args) cmdline_size = 0;
  for (size_t i = 0; i < cmdline_size;) {  // NUL-separated arguments; an empty one is still an argument
    size_t len = strnlen(cmdline + i, cmdline_size - i);
    w.raw_varint(4 << 3 | 2);
    w.raw_varint(len);
    w.raw_bytes(cmdline + i, len);
    i += len + 1;
  }
  w.uint(5, g_start_ns);
  w.uint(6, static_cast<uint64_t>(wall.tv_sec) * 1000000000ULL + static_cast<uint64_t>(wall.tv_nsec));
  w.string(7, "memtrace " MEMTRACE_VERSION);
  w.uint(8, g_config.flush_interval_ms);
  w.uint(9, python_hex);
  w.optional_uint(10, true, g_config.max_native_frames);
  w.optional_uint(11, true, g_config.max_native_frames_python);
  w.optional_uint(12, g_config.rank != kNoJobNumber, static_cast<uint64_t>(g_config.rank));
  w.optional_uint(13, g_config.local_rank != kNoJobNumber, static_cast<uint64_t>(g_config.local_rank));
  w.optional_uint(14, g_config.world_size != kNoJobNumber, static_cast<uint64_t>(g_config.world_size));
  w.string(15, g_config.job_id);
  w.uint(16, static_cast<uint64_t>(g_config.job_id_source));
  append_record_locked(field::kStart, w);
}

void* map_bytes(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void append_python_unsupported_locked() {
  char message[400];
  snprintf(message, sizeof message, "Python frames not recorded: %s", python_frames_unsupported_reason());
  append_notice_locked(NoticeCode::kPythonUnsupported, message, 0);
}

// Python may be absent at start and appear later (a C++ program that embeds it): detection is retried
// from the writer thread, when new modules appear, until it gives a definite answer.
void detect_python() {
  if (g_python_support != PythonSupport::kAbsent || !g_config.python_frames) return;
  uint32_t hex = 0;
  g_python_support = python_frames_init(&hex);
  if (g_python_support != PythonSupport::kSupported) return;
  g_python_hex = hex;
  g_python_ready.store(true, std::memory_order_release);
}

void on_exit_handler();
void on_fork_prepare();
void on_fork_parent();
void on_fork_child();

// Writes a line of ours to stderr with SIGPIPE blocked: where stderr is a pipe whose reader has gone (a log
// collector that stopped), the write fails with EPIPE instead of raising SIGPIPE, which would kill a job that
// untraced would have exited normally (at the end line our SIGPIPE handler would also wait on the flush lock
// this thread holds).
// A SIGPIPE our failed write raised (EPIPE) is taken off the pending set before the mask is restored; one that
// was pending before, or came from elsewhere while the write did not fail, is left for the job. Signal masks,
// write(2) and rt_sigtimedwait: system calls, safe in a handler.
void write_to_stderr(const char* text, size_t size) {
  sigset_t pipe_only, saved_mask, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &saved_mask);
  bool broken_pipe = false;
  for (size_t done = 0; done < size;) {
    ssize_t n = write(STDERR_FILENO, text + done, size - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      broken_pipe = errno == EPIPE;
      break;
    }
  }
  if (broken_pipe && !was_pending) {
    timespec now{0, 0};
    sigtimedwait(&pipe_only, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &saved_mask, nullptr);
}

// The trace's path made absolute at start, so that the end line names the file (and finds its size) after the
// job changed directory (Hydra does). Left as it is when the working directory is unknown or the result too long.
// Static buffers: start() runs on the job's thread inside a hook (its stack may be small), one at a time.
void make_absolute(char* path, size_t size) {
  if (path[0] == '/') return;
  static char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return;
  static char joined[4096 + 1 + 4096];
  const int n = snprintf(joined, sizeof joined, "%s/%s", cwd, path);
  if (n > 0 && static_cast<size_t>(n) < size) memcpy(path, joined, static_cast<size_t>(n) + 1);
}

// Runs once, inside the first hook that records something.
void start() {
  config_load(&g_config);
  // 786,432 distinct stacks and 196,608 Python source positions (3/4 of each table) before stacks are dropped;
  // the memory is virtual until used (16 B a slot).
  if (!g_stacks.init(1 << 20) || !g_python_frames.init(1 << 18)) return;
  for (ChunkBuffer& b : g_buffers) {
    b.data = static_cast<uint8_t*>(map_bytes(g_config.buffer_bytes));
    b.size = 0;
    if (!b.data) return;
  }
  if (const char* refusal = sink_refusal(g_config.output_path)) {
    fprintf(stderr, "memtrace: cannot create trace file %s: %s; not tracing this process\n", g_config.output_path,
            refusal);
    return;
  }
  Sink* sink = sink_open(g_config.output_path, g_trace_path, sizeof g_trace_path);
  if (!sink) {
    fprintf(stderr, "memtrace: cannot create trace file %s: %s; not tracing this process\n",
            g_config.output_path, strerror(errno));
    return;
  }
  if (!g_writer.begin(sink, g_config.buffer_bytes)) {
    fprintf(stderr, "memtrace: cannot write trace file %s: %s; not tracing this process\n", g_trace_path,
            strerror(errno));
    return;
  }
  make_absolute(g_trace_path, sizeof g_trace_path);
  g_trace_pid = getpid();
  if (!stack_capture_init() && (g_config.max_native_frames > 0 || g_config.max_native_frames_python > 0))
    fprintf(stderr, "memtrace: libunwind.so.8 not found (%s): recording without native stacks\n", dlerror());
  detect_python();
  device_usage_start();

  g_start_ns = now_ns();
  g_encoder.begin(g_start_ns);
  pthread_mutex_lock(&g_lock);
  append_start_locked(g_python_support == PythonSupport::kSupported ? g_python_hex : 0);
  if (g_python_support == PythonSupport::kUnsupported) append_python_unsupported_locked();
  g_python_notice_written = g_python_support == PythonSupport::kUnsupported;
  pthread_mutex_unlock(&g_lock);

  if (!g_config.quiet) {
    static char line[sizeof g_trace_path + 32];  // static: see make_absolute
    const int n = snprintf(line, sizeof line, "memtrace: tracing to %s\n", g_trace_path);
    if (n > 0) write_to_stderr(line, std::min(static_cast<size_t>(n), sizeof line - 1));
  }
  static bool registered = false;
  if (!registered) {
    registered = true;
    atexit(on_exit_handler);
  }
  g_state.store(kRunning, std::memory_order_release);
  ending_signals_install();
  g_writer.start_thread(recorder_flush, g_config.flush_interval_ms);
}

bool ensure_started() {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kRunning) return true;
  if (state == kOff) return false;
  pthread_mutex_lock(&g_start_lock);
  // A set-uid or set-gid program (the loader marks it AT_SECURE) is left alone entirely.
  if (g_state.load() == kNotStarted && getauxval(AT_SECURE) != 0) g_state.store(kOff);
  if (g_state.load() == kNotStarted) {
    start();
    if (g_state.load() != kRunning) g_state.store(kOff);
  }
  pthread_mutex_unlock(&g_start_lock);
  return g_state.load() == kRunning;
}

// ---- metadata from the writer thread -------------------------------------------------------------------

// Writes one Module record; false when the filling buffer has no room for it. g_module_lock held (the buffer).
bool emit_module(const ModuleView& m, void*) {
  static uint8_t buf[4096 + 256];
  ProtoWriter w(buf, buf + sizeof buf);
  w.string(1, m.path);
  w.uint(2, m.load_address);
  w.uint(3, m.start);
  w.uint(4, m.end);
  w.bytes(5, m.build_id, m.build_id_size > 64 ? 64 : m.build_id_size);
  pthread_mutex_lock(&g_lock);
  const bool written = append_record_locked(field::kModule, w);
  pthread_mutex_unlock(&g_lock);
  return written;
}

constexpr const char* kTorchHookSymbol = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE";

// PyTorch's allocator layer is seen through libc10.so's exported hook (see preload/hooks.cc). When libc10.so
// is loaded but has no symbol of that name, this torch version changed it: say so once.
void check_torch_hook() {
  if (g_torch_checked) return;
  void* c10 = dlopen("libc10.so", RTLD_NOLOAD | RTLD_LAZY);
  if (!c10) return;
  g_torch_checked = true;
  void* (*real_dlsym)(void*, const char*) = reinterpret_cast<void* (*)(void*, const char*)>(
      dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!real_dlsym) real_dlsym = reinterpret_cast<void* (*)(void*, const char*)>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  bool found = real_dlsym && real_dlsym(c10, kTorchHookSymbol);
  dlclose(c10);
  if (found) return;
  pthread_mutex_lock(&g_lock);
  append_notice_locked(NoticeCode::kTorchHookMissing,
                       "libc10.so is loaded but exports no c10::reportMemoryUsageToProfiler(void*, int64_t, size_t, "
                       "size_t, c10::Device): PyTorch allocator blocks are not recorded, only driver-level segments",
                       0);
  pthread_mutex_unlock(&g_lock);
}

void report_write_failure() {
  fprintf(stderr, "memtrace: writing trace file %s failed: %s; tracing stopped, the file holds what came before\n",
          g_trace_path, strerror(errno));
  g_state.store(kOff);
}

void write_active_buffer(bool g_lock_held = false);

// Writes the Module records of the objects loaded since the last call (module_map.h). g_module_lock held, g_lock
// not (dl_iterate_phdr takes the loader's lock; emit_module takes g_lock).
void emit_new_modules_locked() {
  if (!module_map_changed()) return;
  module_map_emit_new(emit_module, nullptr);
  g_modules_arrived = true;
}

// Modules loaded since the last flush (and what their arrival tells: Python, PyTorch's hook), and the count
// of dropped events. Written before a TraceEnd; a hook writes the modules a new stack may refer to itself
// (record_event), so that this finds them already written.
void append_pending_metadata() {
  pthread_mutex_lock(&g_module_lock);
  emit_new_modules_locked();
  const bool modules_arrived = g_modules_arrived;
  g_modules_arrived = false;
  pthread_mutex_unlock(&g_module_lock);
  if (modules_arrived) {
    detect_python();
    if (g_python_support == PythonSupport::kUnsupported && !g_python_notice_written) {
      g_python_notice_written = true;
      pthread_mutex_lock(&g_lock);
      append_python_unsupported_locked();
      pthread_mutex_unlock(&g_lock);
    }
    check_torch_hook();
  }
  pthread_mutex_lock(&g_lock);
  // The counts are only marked reported once their notice is in a buffer (a full buffer is why events drop).
  if (g_dropped != g_dropped_reported &&
      append_notice_locked(NoticeCode::kEventsDropped, "the writer fell behind: events were not recorded",
                           g_dropped - g_dropped_reported))
    g_dropped_reported = g_dropped;
  if (g_stackless != g_stackless_reported &&
      append_notice_locked(NoticeCode::kStacksNotRecorded,
                           "the table of distinct stacks is full: events were recorded without their stack",
                           g_stackless - g_stackless_reported))
    g_stackless_reported = g_stackless;
  pthread_mutex_unlock(&g_lock);
}

// Writes the filling buffer as one chunk. g_flush_lock held.
// The metadata goes into the buffer after the one being written: the buffer may be full, which is when the
// drop count matters most, and the analyzer resolves stacks and modules only once the whole file is read.
void flush_locked_flush(bool final_flush) {
  if (g_state.load() != kRunning && !final_flush) return;
  write_active_buffer();
  append_pending_metadata();
}

// Swaps the buffers and writes the one that was filling. g_flush_lock held; g_lock taken here unless the
// caller (a fatal-signal handler on a thread that was inside the recorder) already holds it.
void write_active_buffer(bool g_lock_held) {
  if (!g_lock_held) pthread_mutex_lock(&g_lock);
  ChunkBuffer& full = g_buffers[g_active];
  g_active ^= 1;
  g_encoder.start_chunk();
  g_wake_sent = false;
  if (!g_lock_held) pthread_mutex_unlock(&g_lock);
  // g_flush_lock keeps the other buffer ours until it is written and emptied.
  if (full.size && g_state.load() != kOff && !g_writer.write_chunk(full.data, full.size)) report_write_failure();
  full.size = 0;
}

uint64_t g_end_events = 0;  // TraceEnd.events of the last TraceEnd written, for the end-of-trace line

void append_end_locked(EndHow how, int signal) {
  g_end_events = g_events;
  uint8_t buf[64];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, g_events);
  w.uint(2, g_dropped);
  // A job that survives a signal goes on after this record: deltas chain through it.
  w.sint(6, g_encoder.end_time_delta_us(now_ns()));
  w.uint(4, static_cast<uint64_t>(how));
  w.uint(5, static_cast<uint64_t>(signal));
  append_record_locked(field::kEnd, w);
  g_end_written = true;
}

// Writes the TraceEnd and the last chunk; g_flush_lock is held by the caller. False when the trace had its
// TraceEnd already (the end-of-trace line was printed then).
bool finish_locked(EndHow how, int signal) {
  if (g_end_written) return false;
  write_active_buffer();
  append_pending_metadata();
  pthread_mutex_lock(&g_lock);
  append_end_locked(how, signal);
  pthread_mutex_unlock(&g_lock);
  write_active_buffer();
  return true;
}

// ---- the end-of-trace line -----------------------------------------------------------------------------
// "memtrace: wrote PATH (N events, B bytes)" on stderr once a trace has its TraceEnd, so that the user learns
// which file to open: the start line may be screens above, and `memtrace run` execs the job, so it cannot say
// it afterwards. The same code runs in a fatal signal's handler, so it uses no stdio and allocates nothing:
// stat(2) and write(2) only, both async-signal-safe. The line is built in a static buffer, not on the stack
// (a handler's alternate stack may be small); every caller holds g_flush_lock, which makes the buffer theirs.
char g_end_line[sizeof g_trace_path + 96];


// Appends `text` to g_end_line at `*at`, cut at the buffer's end.
void end_line_append(size_t* at, const char* text) {
  while (*text && *at < sizeof g_end_line - 1) g_end_line[(*at)++] = *text++;
}

// `value` in decimal (snprintf is not async-signal-safe).
void end_line_append(size_t* at, uint64_t value) {
  char digits[20];  // least significant first; 2^64 - 1 has 20
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value);
  while (n > 0 && *at < sizeof g_end_line - 1) g_end_line[(*at)++] = digits[--n];
}

// B is the file's size once the TraceEnd's chunk is written; a sink that is not a regular file
// (MEMTRACE_OUTPUT=/dev/null) has no size to give, and the line names the events only.
void print_end_line() {
  if (g_config.quiet) return;
  const int saved_errno = errno;
  size_t at = 0;
  end_line_append(&at, "memtrace: wrote ");
  end_line_append(&at, g_trace_path);
  end_line_append(&at, " (");
  end_line_append(&at, g_end_events);
  end_line_append(&at, g_end_events == 1 ? " event" : " events");
  struct stat file;
  if (stat(g_trace_path, &file) == 0 && S_ISREG(file.st_mode)) {
    end_line_append(&at, ", ");
    end_line_append(&at, static_cast<uint64_t>(file.st_size));
    end_line_append(&at, file.st_size == 1 ? " byte" : " bytes");
  }
  end_line_append(&at, ")\n");
  write_to_stderr(g_end_line, at);
  errno = saved_errno;
}

// After a finish: the line, unless writing failed on the way (that failure's own line said what the file holds).
void print_end_line_if_written() {
  if (g_state.load() == kRunning) print_end_line();
}

// Waits up to ~1 s for `m`. In a signal handler the holder may be the writer thread in mid-flush (it
// will let go) or a thread that will never run again (we then give up rather than hang the crash). The
// writer compresses a whole chunk under the flush lock: on a loaded 2-core machine that took longer than
// the 100 ms this wait once allowed, and a crash lost its TraceEnd and last chunk (e2e_crash_async).
bool lock_within_bounded_wait(pthread_mutex_t* m) {
  for (int i = 0; i < 1000; i++) {
    if (pthread_mutex_trylock(m) == 0) return true;
    timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
  return false;
}

// DEVICE_USAGE samples (device_usage.h) for each flush interval in which events were recorded, and at the
// end (`always`). From the writer thread or the exit path only.
uint64_t g_events_sampled = 0;  // g_events after the last samples, counting them
void sample_devices(bool always) {
  pthread_mutex_lock(&g_lock);
  uint64_t events = g_events;
  pthread_mutex_unlock(&g_lock);
  if (!always && events == g_events_sampled) return;
  t_never_waits = true;
  g_events_sampled = events + static_cast<uint64_t>(device_usage_sample_all());
  t_never_waits = false;
}

// atexit: the job is ending. Stop the thread and write what is buffered. Events after this (static
// destructors freeing memory) are written by the library destructor below.
void on_exit_handler() {
  if (g_state.load() != kRunning || getpid() != g_trace_pid) return;
  g_writer.stop_thread();
  sample_devices(/*always=*/true);
  pthread_mutex_lock(&g_flush_lock);
  flush_locked_flush(true);
  g_exited.store(true);
  pthread_mutex_unlock(&g_flush_lock);
}

// The fork handlers are registered when the library loads, not when tracing starts: a fork while another
// thread is inside start() must already find them, or the child inherits g_start_lock held by a thread it
// does not have. Registering starts nothing (no thread, no file).
__attribute__((constructor)) void on_load() { pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child); }

__attribute__((destructor)) void on_unload() {
  if (g_state.load() != kRunning || getpid() != g_trace_pid) return;
  g_writer.stop_thread();
  pthread_mutex_lock(&g_flush_lock);
  if (finish_locked(EndHow::kExit, 0)) print_end_line_if_written();
  pthread_mutex_unlock(&g_flush_lock);
}

// fork: hold our locks across fork() so the child never inherits one mid-update, or held by a thread it does not
// have (the Python check's lock, taken by a thread inside start(), hung e2e_fork_threads' child). The child starts
// a new trace (its own file) at its first CUDA call; what the parent had buffered stays the parent's.
// g_start_lock is only tried: the thread inside start() may itself be waiting for what the forking thread
// does next. A child that inherits a start half done simply starts again (it resets everything below).
bool g_fork_holds_start_lock = false;
void on_fork_prepare() {
  stack_capture_fork_prepare();  // first: an unwind in flight takes none of our locks, so it can end
  g_fork_holds_start_lock = pthread_mutex_trylock(&g_start_lock) == 0;
  pthread_mutex_lock(&g_flush_lock);
  pthread_mutex_lock(&g_module_lock);  // no thread of ours inside dl_iterate_phdr (see stack_capture.cc) at fork
  pthread_mutex_lock(&g_lock);
  // Last: a thread inside start() holds it only around the Python check, and takes none of ours inside it.
  python_frames_fork_prepare();
}
void on_fork_parent() {
  python_frames_fork_parent();
  pthread_mutex_unlock(&g_lock);
  pthread_mutex_unlock(&g_module_lock);
  pthread_mutex_unlock(&g_flush_lock);
  if (g_fork_holds_start_lock) pthread_mutex_unlock(&g_start_lock);
  stack_capture_fork_parent();
}
void on_fork_child() {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_lock = fresh;
  g_flush_lock = fresh;
  g_module_lock = fresh;
  g_start_lock = fresh;
  python_frames_fork_child();
  stack_capture_fork_child();
  t_tid = 0;
  g_generation.fetch_add(1);
  if (g_state.load() != kRunning) return;
  g_writer.forget_thread();
  for (ChunkBuffer& b : g_buffers) b.size = 0;
  g_stacks.clear();
  g_recent_stacks.clear();
  g_python_frames.clear();
  module_map_reset();
  g_modules_arrived = false;
  g_events = g_dropped = g_dropped_reported = g_stackless = g_stackless_reported = 0;
  g_finalizing_marked = false;
  g_torch_checked = false;
  g_end_written = false;
  g_state.store(kNotStarted);
}

// Whether `stack` holds a native frame (frames without kPythonFrameBit are return addresses).
bool has_native_frame(const CapturedStack& stack) {
  for (int i = 0; i < stack.frame_count; i++)
    if (!(stack.frames[i] & kPythonFrameBit)) return true;
  return false;
}

// A stack seen for the first time (g_lock held by record_event): the Module records of the objects its native
// frames are in go first (memtrace.proto: Module), so g_lock is let go while the objects loaded since the last
// look are written. Once per distinct stack, never per event: the lookup of a known stack is all an event pays.
// Another thread may write the same stack meanwhile; it is looked up again.
__attribute__((noinline)) uint64_t write_new_stack_locked(const CapturedStack& stack) {
  if (has_native_frame(stack)) {
    t_holds_lock = false;
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_lock(&g_module_lock);
    emit_new_modules_locked();
    pthread_mutex_unlock(&g_module_lock);
    pthread_mutex_lock(&g_lock);
    t_holds_lock = true;
    if (uint64_t id = find_stack_locked(stack)) return id;
  }
  return write_stack_locked(stack);
}

// MEMTRACE_FULL_BUFFER=wait: both buffers are full, so the job waits for the writer (with the lock
// released) instead of losing the event. The price is the job's time, which is why it is not the default.
void wait_for_room_locked(const MemoryEvent& e, uint64_t stack_id) {
  for (;;) {
    g_writer.wake();
    t_holds_lock = false;
    pthread_mutex_unlock(&g_lock);
    timespec pause{0, 100000};
    nanosleep(&pause, nullptr);
    pthread_mutex_lock(&g_lock);
    t_holds_lock = true;
    if (append_event_locked(e, stack_id)) return;
    if (g_state.load() != kRunning || g_exited.load()) {  // no writer will make room any more
      drop_event_locked();
      return;
    }
  }
}

}  // namespace

// ---- public --------------------------------------------------------------------------------------------

void record_device(int ordinal, const uint8_t (&uuid)[16], const char* name, uint64_t total_bytes) {
  if (g_state.load(std::memory_order_acquire) != kRunning || ordinal < 0) return;
  uint8_t buf[16 + sizeof uuid + 256 + 16];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(ordinal));
  w.bytes(2, uuid, sizeof uuid);
  w.bytes(3, name, utf8_prefix(name, strlen(name), 255));
  w.uint(4, total_bytes);
  pthread_mutex_lock(&g_lock);
  t_holds_lock = true;
  append_record_locked(field::kDevice, w);
  t_holds_lock = false;
  pthread_mutex_unlock(&g_lock);
}

HookScope::HookScope() : outermost_(t_hook_depth++ == 0) {}
HookScope::~HookScope() { t_hook_depth--; }

void recorder_finish(EndHow how) {
  if (g_state.load() != kRunning || getpid() != g_trace_pid) return;
  g_writer.stop_thread();
  sample_devices(/*always=*/true);
  pthread_mutex_lock(&g_flush_lock);
  // No line at exec: the new image prints its own, and an exec that fails (execvp trying each directory of
  // PATH) comes back here once for each try.
  if (finish_locked(how, 0) && how != EndHow::kExec) print_end_line_if_written();
  pthread_mutex_unlock(&g_flush_lock);
  g_state.store(kOff);
}

bool recorder_exit_begun() { return g_exited; }

void recorder_resume_after_exec_failure() {
  if (g_state.load() != kOff || !g_end_written || getpid() != g_trace_pid) return;
  pthread_mutex_lock(&g_flush_lock);
  g_end_written = false;
  pthread_mutex_unlock(&g_flush_lock);
  g_state.store(kRunning);
  g_writer.start_thread(recorder_flush, g_config.flush_interval_ms);
}

// The signal may arrive on a thread that holds g_lock (it was appending a record): everything up to the
// buffer's size is complete then, since a record's bytes are written before the size moves past them, and
// every other thread waits for the lock. So the handler writes under the lock it already has.
//
// Tracing goes on afterwards: a program handler may recover (siglongjmp) and the job live on. Its next
// event then reopens the trace (record_event), and a later end writes another TraceEnd; readers take the
// last one.
void recorder_flush_from_signal() {
  if (g_state.load() != kRunning || getpid() != g_trace_pid) return;
  if (!lock_within_bounded_wait(&g_flush_lock)) return;
  if (t_holds_lock) {
    write_active_buffer(/*g_lock_held=*/true);
  } else if (lock_within_bounded_wait(&g_lock)) {
    write_active_buffer(/*g_lock_held=*/true);
    pthread_mutex_unlock(&g_lock);
  }
  pthread_mutex_unlock(&g_flush_lock);
}

// g_lock is taken only within the bounded wait, never plainly: the interrupted thread may hold it without
// t_holds_lock saying so (between the lock and the flag, on the exit path), and a plain lock would wait forever.
// The filling buffer and then the TraceEnd's are written under it.
void recorder_finish_from_signal(int signal, bool process_dies, EndHow how) {
  if (g_state.load() != kRunning || getpid() != g_trace_pid) return;
  if (!lock_within_bounded_wait(&g_flush_lock)) return;
  if (!g_end_written) {
    bool own_lock = t_holds_lock;
    if (own_lock || lock_within_bounded_wait(&g_lock)) {
      write_active_buffer(/*g_lock_held=*/true);
      append_end_locked(how, signal);
      write_active_buffer(/*g_lock_held=*/true);
      if (!own_lock) pthread_mutex_unlock(&g_lock);
      print_end_line_if_written();  // write(2) only: see print_end_line
    }
  }
  // The process dies once this handler returns, but other threads run on until it does (long, on a loaded
  // machine): their events would fill a buffer that the writer thread flushes after the TraceEnd, and the
  // file would read as a process that survived. Keeping the flush lock stops every later write.
  if (process_dies) return;
  pthread_mutex_unlock(&g_flush_lock);
}

void recorder_flush() {
  pthread_mutex_lock(&g_flush_lock);
  flush_locked_flush(false);
  pthread_mutex_unlock(&g_flush_lock);
  // After the flush: the samples go into the buffer just emptied, and the next flush writes them.
  if (g_state.load() == kRunning) sample_devices(/*always=*/false);
}

namespace {
// Starts bringing in, before the stack is captured, the lines the locked section will write: the lock and the
// fields beside it, the encoder's state and this device's totals, and the chunk buffer where the record will
// go. Why: after the job's own work between two events they are in L3 at best, and the locked section would
// miss on each in turn (on the GPU machine ~230 ns of encoding and appending per event, most of it waiting);
// the unwind that follows takes several hundred ns, time enough for all of them to arrive. Write intent
// (`rw` 1): the section writes each line, so it is fetched for ownership. Nothing here is read for its value
// but the hint, an atomic: prefetching never faults and a stale address only wastes the prefetch.
void prefetch_event_state(int device) {
  __builtin_prefetch(&g_event_state, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(&g_event_state) + 64, 1);
  g_encoder.prefetch(device);
  // As integers: before the first append the hint is null, and null + 63 would be undefined behaviour.
  const uintptr_t next = reinterpret_cast<uintptr_t>(g_append_hint.load(std::memory_order_relaxed));
  __builtin_prefetch(reinterpret_cast<const void*>(next), 1);
  // A record that starts late in a line ends in the next one.
  __builtin_prefetch(reinterpret_cast<const void*>(next + 63), 1);
}
}  // namespace

void record_event(const MemoryEvent& e) {
  if (!MEMTRACE_BENCH_RECORDING()) return;
  if (!ensure_started()) return;
  device_usage_note_device(e.device);
  MEMTRACE_PHASE(kStarted);
  prefetch_event_state(e.device);

  CapturedStack stack;
  bool python = g_python_ready.load(std::memory_order_acquire);
  if (e.kind == EventKind::kAlloc || e.kind == EventKind::kOom) {
    const int max_native_with_python =
        MEMTRACE_BENCH_MAX_NATIVE_FRAMES_PYTHON(static_cast<int>(g_config.max_native_frames_python));
    capture_stack(&stack, static_cast<int>(g_config.max_native_frames), max_native_with_python, python,
                  static_cast<uint8_t>(e.api));
  } else {
    stack.frame_count = 0;
    stack.python_count = 0;
  }
  bool finalizing = python && !g_finalizing_marked && python_is_finalizing();
  // The stack's slot of the recent-ids cache: its address is known only now; taking the lock hides part of
  // the miss.
  if (stack.frame_count) g_recent_stacks.prefetch(stack.key);
  MEMTRACE_PHASE(kStack);

  pthread_mutex_lock(&g_lock);
  MEMTRACE_PHASE(kLocked);
  t_holds_lock = true;
  if (g_end_written) g_end_written = false;  // an event after a TraceEnd{SIGNAL}: the program survived it
  if (t_announced_generation != g_generation.load(std::memory_order_relaxed)) append_thread_info_locked();
  if (finalizing && !g_finalizing_marked) {
    MemoryEvent marker;
    marker.kind = EventKind::kPythonFinalizing;
    g_finalizing_marked = append_event_locked(marker, 0);
  }
  uint64_t stack_id = find_stack_locked(stack);
  if (stack_id == 0 && stack.frame_count > 0) {
    stack_id = write_new_stack_locked(stack);
    if (stack_id == 0) g_stackless++;
  }
  if (!append_event_locked(e, stack_id)) {
    if (g_config.wait_when_full && !t_never_waits)
      wait_for_room_locked(e, stack_id);
    else
      drop_event_locked();
  }
  wake_writer_if_filling_locked();
  MEMTRACE_PHASE(kAppended);
  t_holds_lock = false;
  pthread_mutex_unlock(&g_lock);
  MEMTRACE_PHASE(kUnlocked);
}

}  // namespace memtrace
