// The trace's records other than events (recorder.cc appends those): TraceStart, TraceEnd, Module, the
// notices written at a flush; writing the filling buffer as a chunk; and the end-of-trace line. Called by the
// lifecycle (lifecycle.cc) at start, at each flush of the writer thread and at the end; declared in
// recorder_state.h.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "record/recorder_state.h"
#include "stacks/module_map.h"

namespace memtrace {

AttachStart g_attach_start;

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
  w.uint(17, static_cast<uint64_t>(g_attach_start.origin));
  w.uint(18, g_attach_start.attach_number);
  w.uint(19, g_attach_start.driver_layer);
  w.uint(20, g_attach_start.torch_layer);
  append_record_locked(field::kStart, w);
}

void append_python_unsupported_locked() {
  char message[400];
  snprintf(message, sizeof message, "Python frames not recorded: %s", python_frames_unsupported_reason());
  append_notice_locked(NoticeCode::kPythonUnsupported, message, 0);
}

void detect_python() {
  if (g_python_support != PythonSupport::kAbsent || !g_config.python_frames) return;
  uint32_t hex = 0;
  g_python_support = python_frames_init(&hex);
  if (g_python_support != PythonSupport::kSupported) return;
  g_python_hex = hex;
  g_python_ready.store(true, std::memory_order_release);
}

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

namespace {

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

// PyTorch's allocator layer is seen through libc10.so's exported hook (see preload/hooks/c10_hooks.cc). When
// libc10.so is loaded but has no symbol of that name, this torch version changed it: say so once.
void check_torch_hook() {
  if (g_torch_checked) return;
  void* c10 = dlopen("libc10.so", RTLD_NOLOAD | RTLD_LAZY);
  if (!c10) return;
  g_torch_checked = true;
  void* (*real_dlsym)(void*, const char*) =
      reinterpret_cast<void* (*)(void*, const char*)>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!real_dlsym)
    real_dlsym = reinterpret_cast<void* (*)(void*, const char*)>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
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

}  // namespace

// ---- chunks and the end --------------------------------------------------------------------------------

void emit_new_modules_locked() {
  if (!module_map_changed()) return;
  module_map_emit_new(emit_module, nullptr);
  g_modules_arrived = true;
}

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

namespace {
uint64_t g_end_events = 0;  // TraceEnd.events of the last TraceEnd written, for the end-of-trace line
}  // namespace

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

namespace {

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

}  // namespace

void print_end_line_if_written() {
  if (g_state.load() == kRunning) print_end_line();
}

void print_end_line_after_detach() { print_end_line(); }

}  // namespace memtrace
