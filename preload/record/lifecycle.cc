// The trace's lifecycle (lifecycle.h): the state machine's transitions and what happens at each, start,
// the writer thread's flush, the ends (exit, _exit, exec, fatal signals) and fork. The records written on the
// way are trace_records.cc's; the state is recorder_state.h's.
#include "record/lifecycle.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "record/clients.h"
#include "record/recorder_state.h"
#include "stacks/module_map.h"
#include "stacks/python_frames.h"
#include "stacks/stack_capture.h"

namespace memtrace {
namespace {

// The one place the state changes: g_state moves as next_state() (lifecycle.h) says. Sequentially consistent,
// as every store of the state was before the states had names; the hot path reads it with acquire.
void transition(LifecycleEvent event) {
  const TraceState from = g_state.load();
  const TraceState to = next_state(from, event);
  if (to != from) g_state.store(to);
}

void on_exit_handler();
void on_fork_prepare();
void on_fork_parent();
void on_fork_child();

void* map_bytes(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
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
  // the memory is virtual until used (16 B a slot). 49,152 NVTX range names (a job has a few dozen).
  if (!g_stacks.init(1 << 20) || !g_python_frames.init(1 << 18) || !g_range_names.init(1 << 16)) return;
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
    fprintf(stderr, "memtrace: cannot create trace file %s: %s; not tracing this process\n", g_config.output_path,
            strerror(errno));
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
  transition(LifecycleEvent::kStarted);
  ending_signals_install();
  g_writer.start_thread(recorder_flush, g_config.flush_interval_ms);
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

// DEVICE_USAGE samples (samplers/device_usage.h) for each flush interval in which events were recorded, and at the
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
  g_range_names.clear();
  module_map_reset();
  g_modules_arrived = false;
  g_events = g_dropped = g_dropped_reported = g_stackless = g_stackless_reported = 0;
  g_finalizing_marked = false;
  g_torch_checked = false;
  g_end_written = false;
  transition(LifecycleEvent::kForked);
}

}  // namespace

// ---- public --------------------------------------------------------------------------------------------

bool start_trace_once() {
  pthread_mutex_lock(&g_start_lock);
  // A set-uid or set-gid program (the loader marks it AT_SECURE) is left alone entirely.
  if (g_state.load() == kNotStarted && getauxval(AT_SECURE) != 0) transition(LifecycleEvent::kStartFailed);
  if (g_state.load() == kNotStarted) {
    start();
    if (g_state.load() != kRunning) transition(LifecycleEvent::kStartFailed);
  }
  pthread_mutex_unlock(&g_start_lock);
  return g_state.load() == kRunning;
}

void report_write_failure() {
  fprintf(stderr, "memtrace: writing trace file %s failed: %s; tracing stopped, the file holds what came before\n",
          g_trace_path, strerror(errno));
  transition(LifecycleEvent::kWriteFailed);
}

void recorder_finish(EndHow how) {
  if (g_state.load() != kRunning || getpid() != g_trace_pid) return;
  g_writer.stop_thread();
  sample_devices(/*always=*/true);
  pthread_mutex_lock(&g_flush_lock);
  // No line at exec: the new image prints its own, and an exec that fails (execvp trying each directory of
  // PATH) comes back here once for each try.
  if (finish_locked(how, 0) && how != EndHow::kExec) print_end_line_if_written();
  pthread_mutex_unlock(&g_flush_lock);
  transition(LifecycleEvent::kEnded);
}

bool recorder_exit_begun() { return g_exited; }

void recorder_resume_after_exec_failure() {
  if (g_state.load() != kOff || !g_end_written || getpid() != g_trace_pid) return;
  pthread_mutex_lock(&g_flush_lock);
  g_end_written = false;
  pthread_mutex_unlock(&g_flush_lock);
  transition(LifecycleEvent::kExecFailed);
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

}  // namespace memtrace
