// The trace's lifecycle (lifecycle.h): the state machine's transitions and what happens at each, start,
// the writer thread's flush, the ends (exit, _exit, exec, fatal signals) and fork. The records written on the
// way are trace_records.cc's; the state is recorder_state.h's.
#include "record/lifecycle.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "attach/control_server.h"
#include "attach/injected_sources.h"
#include "attach/live_set.h"
#include "measure/bench_toggle.h"
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
void reset_in_flight_counts();
void register_membarrier();
void stop_resolving_live_set();

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

void register_exit_handler() {
  static bool registered = false;
  if (!registered) {
    registered = true;
    atexit(on_exit_handler);
  }
}

// The tables and the two chunk buffers, once per process (a forked child keeps its parent's, emptied).
bool init_tables_and_buffers() {
  static bool done = false;
  if (done) return true;
  // 786,432 distinct stacks and 196,608 Python source positions (3/4 of each table) before stacks are dropped;
  // the memory is virtual until used (16 B a slot). 49,152 NVTX range names (a job has a few dozen).
  if (!g_stacks.init(1 << 20) || !g_python_frames.init(1 << 18) || !g_range_names.init(1 << 16)) return false;
  for (ChunkBuffer& b : g_buffers) {
    b.data = static_cast<uint8_t*>(map_bytes(g_config.buffer_bytes));
    b.size = 0;
    if (!b.data) return false;
  }
  done = true;
  return true;
}

// Creates the trace file `path` and writes its header; `error` (one line) says why not.
bool open_trace_file(const char* path, char* error, size_t error_size) {
  if (const char* refusal = sink_refusal(path)) {
    snprintf(error, error_size, "cannot create trace file %s: %s", path, refusal);
    return false;
  }
  Sink* sink = sink_open(path, g_trace_path, sizeof g_trace_path);
  if (!sink) {
    snprintf(error, error_size, "cannot create trace file %s: %s", path, strerror(errno));
    return false;
  }
  if (!g_writer.begin(sink, g_config.buffer_bytes)) {
    snprintf(error, error_size, "cannot write trace file %s: %s", g_trace_path, strerror(errno));
    g_writer.end();
    return false;
  }
  return true;
}

// Once the trace's file is open: whose trace it is, its time zero and its TraceStart. `live_set_only`: a
// snapshot's trace, which records no event, needs neither the unwinder nor Python's frames.
void begin_trace(bool live_set_only) {
  make_absolute(g_trace_path, sizeof g_trace_path);
  g_trace_pid = getpid();
  if (!live_set_only) {
    if (!stack_capture_init() && (g_config.max_native_frames > 0 || g_config.max_native_frames_python > 0))
      fprintf(stderr, "memtrace: libunwind.so.8 not found (%s): recording without native stacks\n", dlerror());
    detect_python();
  }
  device_usage_start();
  g_start_ns = now_ns();
  g_encoder.begin(g_start_ns);
  pthread_mutex_lock(&g_lock);
  append_start_locked(g_python_support == PythonSupport::kSupported ? g_python_hex : 0);
  if (g_python_support == PythonSupport::kUnsupported) append_python_unsupported_locked();
  g_python_notice_written = g_python_support == PythonSupport::kUnsupported;
  pthread_mutex_unlock(&g_lock);
}

// Runs once, inside the first hook that records something (config_load has run).
void start() {
  if (!init_tables_and_buffers()) return;
  // Empty, also in a child forked while its parent was inside start() (its TraceStart may be in the buffer).
  for (ChunkBuffer& b : g_buffers) b.size = 0;
  static char error[4096 + 128];  // static: see make_absolute
  if (!open_trace_file(g_config.output_path, error, sizeof error)) {
    fprintf(stderr, "memtrace: %s; not tracing this process\n", error);
    return;
  }
  begin_trace(/*live_set_only=*/false);

  if (!g_config.quiet) {
    static char line[sizeof g_trace_path + 32];  // static: see make_absolute
    const int n = snprintf(line, sizeof line, "memtrace: tracing to %s\n", g_trace_path);
    if (n > 0) write_to_stderr(line, std::min(static_cast<size_t>(n), sizeof line - 1));
  }
  register_exit_handler();
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
  control_server_remove_endpoint();
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
  stop_resolving_live_set();  // an attach or snapshot of the parent's control thread is not the child's
  if (g_state.load() == kDormant) {
    // The parent's live set is not the child's memory, nor its endpoint the child's: it starts again at its
    // own first event. Threads that were inside the dormant path at the fork are not the child's: their counts go.
    live_set_clear();
    reset_in_flight_counts();
    transition(LifecycleEvent::kForked);
    return;
  }
  if (g_state.load() != kRunning) return;
  if (g_keep_live_set) live_set_clear();
  g_attach_start = AttachStart{};
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

// ---- dormant mode (docs/attach.md) -----------------------------------------------------------------------

// 1,048,576 slots of 40 bytes, virtual until used: kept below 3/4 full, about 780,000 live allocations.
constexpr size_t kLiveSetCapacity = size_t{1} << 20;

// MEMTRACE_START=dormant at the first event: the live set and the endpoint, no file.
void start_dormant() {
  if (!live_set_init(kLiveSetCapacity, device_and_context_of_pointer)) {
    fprintf(stderr, "memtrace: cannot map the live set (%s); not tracing this process\n", strerror(errno));
    return;
  }
  g_keep_live_set = true;
  g_trace_pid = getpid();
  register_membarrier();
  register_exit_handler();
  transition(LifecycleEvent::kStartedDormant);
  // As at a trace's start: a signal that ends the process removes the endpoint on its way (process_hooks.cc).
  ending_signals_install();
  // Not safely made (control_server_start said why on stderr): nobody could attach, so the process runs on
  // untraced rather than keep a live set for no one.
  if (!control_server_start(TraceOrigin::kAttachDormant)) transition(LifecycleEvent::kEnded);
}

// Threads inside the dormant path: each raises its in-flight count before it reads the state and lowers it once
// the live set holds its event, so that recorder_attach, after it switched the state to kRunning, knows when no
// event can still reach the live set unseen by the window (wait_for_dormant_threads).
//
// Why not a plain atomic increment: two locked instructions an event cost about 12 ns of the 20 ns budget. So each
// of the first kOwnedCounts threads owns a count, written with plain stores, and the order the check needs (the
// count raised before the state is read, against recorder_attach's state store before it reads the counts) comes
// from recorder_attach's membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which makes every running thread of the
// process execute a full barrier: the asymmetric form of the same Dekker handshake (as liburcu's and folly's).
// Threads beyond kOwnedCounts, and every thread where membarrier is refused (an old kernel, a seccomp profile),
// share striped counts with sequentially consistent read-modify-writes. One cache line per count.
struct alignas(64) InFlightCount {
  std::atomic<uint64_t> count{0};
};
constexpr size_t kOwnedCounts = 256;
constexpr size_t kSharedCounts = 16;
InFlightCount g_owned_counts[kOwnedCounts];
InFlightCount g_shared_counts[kSharedCounts];
// An attach or snapshot is resolving the live set (resolve_live_set): a dormant hook looks its allocation's device
// and context up itself instead of leaving them to the set (note_in_live_set_if_dormant refuses). Read inside the
// counted section, as the state is, so that the attach's wait covers every entry noted unresolved before it.
std::atomic<bool> g_live_set_resolving{false};
std::atomic<size_t> g_owned_claimed{0};
bool g_membarrier_ready = false;  // registered at the dormant start, before any dormant event
MEMTRACE_TLS InFlightCount* t_owned_count;
MEMTRACE_TLS bool t_count_chosen;

void register_membarrier() {
#ifdef SYS_membarrier
  constexpr int kRegisterPrivateExpedited = 1 << 4;  // MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
  g_membarrier_ready = syscall(SYS_membarrier, kRegisterPrivateExpedited, 0, 0) == 0;
#endif
}

// A full barrier on every running thread of the process (see above); false when the kernel refused it.
bool membarrier_all_threads() {
#ifdef SYS_membarrier
  constexpr int kPrivateExpedited = 1 << 3;  // MEMBARRIER_CMD_PRIVATE_EXPEDITED
  return g_membarrier_ready && syscall(SYS_membarrier, kPrivateExpedited, 0, 0) == 0;
#else
  return false;
#endif
}

// The count this thread raises: its own (plain stores), or null for a shared one.
__attribute__((noinline)) InFlightCount* choose_count() {
  t_count_chosen = true;
  if (!g_membarrier_ready) return nullptr;
  const size_t index = g_owned_claimed.fetch_add(1);
  t_owned_count = index < kOwnedCounts ? &g_owned_counts[index] : nullptr;
  return t_owned_count;
}

MEMTRACE_TLS char t_stripe_anchor;  // its address tells threads apart at no cost

void reset_in_flight_counts() {
  for (InFlightCount& c : g_owned_counts) c.count.store(0, std::memory_order_relaxed);
  for (InFlightCount& c : g_shared_counts) c.count.store(0, std::memory_order_relaxed);
}

// True when `note()` noted an event in the dormant live set; false when the state was not kDormant by then, or, for
// an event whose device is unresolved (`kUnresolved`), when an attach or snapshot is resolving the set.
template <bool kUnresolved, typename Note>
bool note_dormant_with(Note note) {
  InFlightCount* owned = t_count_chosen ? t_owned_count : choose_count();
  if (owned) {
    owned->count.store(owned->count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the heavy side is recorder_attach's membarrier
    const bool dormant = g_state.load(std::memory_order_relaxed) == kDormant &&
                         !(kUnresolved && g_live_set_resolving.load(std::memory_order_relaxed));
    if (dormant) note();
    owned->count.store(owned->count.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    return dormant;
  }
  InFlightCount& shared = g_shared_counts[(reinterpret_cast<uintptr_t>(&t_stripe_anchor) >> 6) % kSharedCounts];
  shared.count.fetch_add(1, std::memory_order_seq_cst);
  const bool dormant = g_state.load(std::memory_order_seq_cst) == kDormant &&
                       !(kUnresolved && g_live_set_resolving.load(std::memory_order_seq_cst));
  if (dormant) note();
  shared.count.fetch_sub(1, std::memory_order_release);
  return dormant;
}

template <bool kUnresolved>
bool note_dormant(const MemoryEvent& e) {
  return note_dormant_with<kUnresolved>([&e] { live_set_note(e); });
}

// After the state left kDormant or the set began resolving (a sequentially consistent store): waits until no
// thread is in the dormant path.
void wait_for_dormant_threads() {
  // Refused after it was registered: cannot happen (the same call succeeded at registration), but without the
  // barrier the owned counts could be read too early, so wait out a scheduling round as the next best thing.
  if (g_membarrier_ready && !membarrier_all_threads()) usleep(10000);
  for (InFlightCount& c : g_owned_counts)
    while (c.count.load(std::memory_order_acquire) != 0) sched_yield();
  for (InFlightCount& c : g_shared_counts)
    while (c.count.load(std::memory_order_seq_cst) != 0) sched_yield();
}

// Before an attach or snapshot lists the live set: from here on a dormant hook looks its allocation's device and
// context up itself, the threads that noted one without them are waited for, and the set's unresolved entries are
// resolved (live_set_resolve). So the set holds none once the attach's window opens: a free in the window of an
// unresolved entry could not be resolved any more (its memory is gone by the time the baseline is composed), nor
// may the driver be asked under g_lock. Until stop_resolving_live_set (a snapshot's end, a detach, a failed attach).
void resolve_live_set() {
  g_live_set_resolving.store(true);
  wait_for_dormant_threads();
  live_set_resolve();
}

void stop_resolving_live_set() { g_live_set_resolving.store(false); }

// ---- the attach window (g_lock) ----------------------------------------------------------------------------
// From the TraceStart of an attach until its baseline is written, the keys that events recorded meanwhile
// allocate or free (the baseline must not list them again), and the frees of allocations made before the attach
// (the baseline lists them, since the free is in the trace). Mapped at attach, not on the hot path; bounded.

constexpr size_t kWindowKeys = size_t{1} << 16;  // a power of two
constexpr size_t kWindowFrees = size_t{1} << 14;
struct Window {
  uint64_t keys[kWindowKeys];  // open addressing, 0 empty
  size_t key_count;
  LiveEntry frees[kWindowFrees];
  uint64_t free_keys[kWindowFrees];
  size_t free_count;
  uint64_t overflow;  // keys or frees that found no room
  bool injected;      // no live set: a pre-attach free is described by its own event
  // Stream-ordered pool blocks (cuMemAllocAsync...): their count of events, and per device the bytes they
  // allocated less the bytes they freed. The injected tracer reads PyTorch's cudaMallocAsync total at one point
  // of this stream (settle_unlisted_pool_bytes).
  uint64_t pool_events;
  int64_t pool_net_bytes[EventEncoder::kDevices];
};
Window* g_window = nullptr;  // g_lock; non-null while the window is open

size_t window_home(uint64_t key) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 48) & (kWindowKeys - 1);
}

bool window_touched(const Window& w, uint64_t key) {
  for (size_t i = window_home(key);; i = (i + 1) & (kWindowKeys - 1)) {
    if (w.keys[i] == key) return true;
    if (w.keys[i] == 0) return false;
  }
}

void window_touch(Window& w, uint64_t key) {
  if (w.key_count >= kWindowKeys * 3 / 4) {
    w.overflow++;
    return;
  }
  for (size_t i = window_home(key);; i = (i + 1) & (kWindowKeys - 1)) {
    if (w.keys[i] == key) return;
    if (w.keys[i] == 0) {
      w.keys[i] = key;
      w.key_count++;
      return;
    }
  }
}

// The bytes a stream-ordered pool block event moves (+size allocated, -size freed), false for any other event:
// what cudaMemPoolAttrUsedMemCurrent, PyTorch's memory_allocated() under cudaMallocAsync, moves by.
bool pool_block_delta_bytes(const MemoryEvent& e, int64_t* delta_bytes) {
  if (e.layer != Layer::kBlock || e.api == Api::kTorchAllocator || e.graph != 0 || e.capture_id != 0) return false;
  if (e.device < 0 || e.device >= EventEncoder::kDevices) return false;
  const int64_t size = static_cast<int64_t>(e.size);
  if (e.kind == EventKind::kAlloc && e.result == 0) *delta_bytes = size;
  else if (e.kind == EventKind::kFree && (e.result == 0 || e.result == 4)) *delta_bytes = -size;
  else return false;
  return true;
}

// The driver API that made what a free through `free_api` frees: a LiveAtAttach names the allocation, not its free.
Api allocating_api(Api free_api) {
  switch (free_api) {
    case Api::kCuMemFree: return Api::kCuMemAlloc;
    case Api::kCuMemFreeAsync: return Api::kCuMemAllocAsync;
    case Api::kCuMemRelease: return Api::kCuMemCreate;
    case Api::kCuMemFreeHost: return Api::kCuMemAllocHost;
    case Api::kCuMemHostUnregister: return Api::kCuMemHostRegister;
    case Api::kCuArrayDestroy: return Api::kCuArrayCreate;
    case Api::kCuMipmappedArrayDestroy: return Api::kCuMipmappedArrayCreate;
    default: return free_api;
  }
}

// Before live_set_note(e): what the live set holds for a freed key is the allocation made before attach.
void window_note(Window& w, const MemoryEvent& e) {
  int64_t pool_delta_bytes = 0;
  if (pool_block_delta_bytes(e, &pool_delta_bytes)) {
    w.pool_events++;
    w.pool_net_bytes[e.device] += pool_delta_bytes;
  }
  uint64_t allocated, freed, freed_alt;
  live_set_keys_of(e, &allocated, &freed, &freed_alt);
  if (freed && !window_touched(w, freed) && !(freed_alt && window_touched(w, freed_alt))) {
    LiveEntry entry;
    uint64_t key = freed;
    bool known = live_set_find(freed, &entry);
    if (!known && freed_alt && live_set_find(freed_alt, &entry)) {
      known = true;
      key = freed_alt;
    }
    if (!known && w.injected) {
      entry.layer = e.layer;
      entry.api = allocating_api(e.api);
      entry.memory = e.memory;
      entry.device = e.device;
      entry.address = e.address;
      entry.size = e.size;
      entry.stream = e.stream;
      known = true;
    }
    if (known) {
      if (w.free_count < kWindowFrees) {
        w.frees[w.free_count] = entry;
        w.free_keys[w.free_count++] = key;
      } else {
        w.overflow++;
      }
      window_touch(w, key);
    }
  }
  if (freed) window_touch(w, freed);
  if (allocated) window_touch(w, allocated);
}

// ---- composing the baseline -------------------------------------------------------------------------------

// What the baseline lists, gathered outside g_lock (the live set is visited while events go on), filtered
// under it against the closed window.
struct Staged {
  uint64_t key;
  LiveEntry entry;
};
struct Staging {
  Staged* entries;
  size_t count;
  size_t capacity;
  uint64_t overflow;
  DeviceBaseline devices[EventEncoder::kDevices];
  bool device_listed[EventEncoder::kDevices];
  // The window's pool figures at the last reading (read_window_pool_events): those of the moment PyTorch's
  // allocated bytes were read, once the snapshot settled.
  int64_t pool_net_bytes_at_listing[EventEncoder::kDevices];
};

void stage(uint64_t key, const LiveEntry& entry, void* context) {
  Staging& s = *static_cast<Staging*>(context);
  if (s.count == s.capacity) {
    s.overflow++;
    return;
  }
  s.entries[s.count++] = Staged{key, entry};
}

void stage_device(Staging& s, int32_t device) {
  if (device < 0 || device >= EventEncoder::kDevices || s.device_listed[device]) return;
  s.device_listed[device] = true;
  s.devices[device].device = device;
}

// An entry of the injected tracer's PyTorch snapshot: its key as the event that made it would have it.
void stage_injected(const LiveEntry& entry, void* context) {
  MemoryEvent made;
  made.kind = EventKind::kAlloc;
  made.layer = entry.layer;
  made.api = entry.api;
  made.address = entry.address;
  uint64_t key, freed, freed_alt;
  live_set_keys_of(made, &key, &freed, &freed_alt);
  if (entry.blocks_unknown) key = 0;  // never in the window: listed as it is
  stage(key, entry, context);
}

void stage_injected_device(const DeviceBaseline& baseline, void* context) {
  Staging& s = *static_cast<Staging*>(context);
  if (baseline.device < 0 || baseline.device >= EventEncoder::kDevices) return;
  s.device_listed[baseline.device] = true;
  s.devices[baseline.device] = baseline;
}

// The snapshot's reading of the event stream (SnapshotSink.pool_events): the window's count of pool block events,
// its per-device bytes kept in the staging. 0 without a window (a snapshot: no events are recorded).
uint64_t read_window_pool_events(void* context) {
  Staging& s = *static_cast<Staging*>(context);
  pthread_mutex_lock(&g_lock);
  uint64_t events = 0;
  if (g_window) {
    events = g_window->pool_events;
    memcpy(s.pool_net_bytes_at_listing, g_window->pool_net_bytes, sizeof s.pool_net_bytes_at_listing);
  }
  pthread_mutex_unlock(&g_lock);
  return events;
}

// A blocks_unknown entry (the cudaMallocAsync backend's memory_allocated(), read at one point of the window) made
// the bytes live when the window opened: less what the window's pool events had moved by that point, and less the
// blocks made before attach that the window frees, which the baseline lists one by one (window_note). docs/attach.md
// "How the switch stays exact". False when the figures do not add up (the entry is then 0 bytes).
bool settle_unlisted_pool_bytes(Staging& staging, const Window& window) {
  int64_t listed_frees_bytes[EventEncoder::kDevices] = {};
  for (size_t i = 0; i < window.free_count; i++) {
    const LiveEntry& f = window.frees[i];
    if (f.layer == Layer::kBlock && f.api != Api::kTorchAllocator && f.device >= 0 && f.device < EventEncoder::kDevices)
      listed_frees_bytes[f.device] += static_cast<int64_t>(f.size);
  }
  bool adds_up = true;
  for (size_t i = 0; i < staging.count; i++) {
    LiveEntry& e = staging.entries[i].entry;
    if (!e.blocks_unknown || e.device < 0 || e.device >= EventEncoder::kDevices) continue;
    const int64_t bytes =
        static_cast<int64_t>(e.size) - staging.pool_net_bytes_at_listing[e.device] - listed_frees_bytes[e.device];
    adds_up = adds_up && bytes >= 0;
    e.size = bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
  }
  return adds_up;
}

// Appends a record to the active buffer; when it is full, writes the buffer as a chunk of its own first (the
// writer thread is not running: g_flush_lock is ours). False when the file could not be written.
bool append_or_write_locked(uint32_t kind, const ProtoWriter& w) {
  if (append_record_locked(kind, w)) return true;
  ChunkBuffer& b = g_buffers[g_active];
  if (!g_writer.write_chunk(b.data, b.size)) return false;
  b.size = 0;
  g_encoder.start_chunk();
  return append_record_locked(kind, w);
}

bool append_live_locked(const LiveEntry& e) {
  uint8_t buf[96];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(e.layer));
  w.uint(2, static_cast<uint64_t>(e.api));
  w.sint(3, e.device);
  w.uint(4, e.address);
  w.uint(5, e.size);
  w.uint(6, static_cast<uint64_t>(e.memory));
  w.uint(7, e.stream);
  w.uint(8, e.blocks_unknown);
  w.uint(9, e.expandable_segment);
  w.uint(10, e.torch_segment);
  return append_or_write_locked(field::kLiveAtAttach, w);
}

bool append_baseline_locked(const DeviceBaseline& d) {
  uint8_t buf[96];
  ProtoWriter w(buf, buf + sizeof buf);
  w.sint(1, d.device);
  w.uint(2, d.device_free_bytes);
  w.uint(3, d.device_total_bytes);
  w.optional_uint(4, d.has_allocator_totals, d.allocator_allocated_bytes);
  w.optional_uint(5, d.has_allocator_totals, d.allocator_reserved_bytes);
  w.optional_uint(6, d.has_process_used, d.process_used_bytes);
  return append_or_write_locked(field::kAttachBaseline, w);
}

// The LiveAtAttach records (what `staging` lists that `window` did not touch, and the window's frees of earlier
// allocations), then an AttachBaseline per device, then ATTACH_INCOMPLETE where something could not be listed.
// g_lock held. False when the file could not be written.
bool append_baseline_records_locked(Staging& staging, const Window* window, uint64_t not_listed) {
  for (size_t i = 0; i < staging.count; i++) {
    const Staged& s = staging.entries[i];
    if (window && s.key && window_touched(*window, s.key)) continue;
    stage_device(staging, s.entry.device);
    if (!append_live_locked(s.entry)) return false;
  }
  if (window) {
    for (size_t i = 0; i < window->free_count; i++) {
      stage_device(staging, window->frees[i].device);
      if (!append_live_locked(window->frees[i])) return false;
    }
  }
  for (const DeviceBaseline& d : staging.devices)
    if (d.device >= 0 && staging.device_listed[d.device] && !append_baseline_locked(d)) return false;
  if (not_listed) {
    char message[200];
    snprintf(message, sizeof message,
             "%llu allocations live at attach could not be listed (the live set or the attach window was full, or "
             "the set could not follow them: a graph's memory)",
             static_cast<unsigned long long>(not_listed));
    uint8_t buf[600];
    ProtoWriter w(buf, buf + sizeof buf);
    w.uint(1, static_cast<uint64_t>(NoticeCode::kAttachIncomplete));
    w.bytes(2, message, strlen(message));
    w.uint(3, not_listed);
    if (!append_or_write_locked(field::kNotice, w)) return false;
  }
  return true;
}

void* map_zeroed(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Each device of the listed entries gets NVML's figures (outside g_lock: NVML can take milliseconds): this
// process's use, and free and total unless the injected tracer gave them (PyTorch's torch.cuda.mem_get_info).
void stage_device_figures(Staging* staging) {
  for (size_t i = 0; i < staging->count; i++) stage_device(*staging, staging->entries[i].entry.device);
  for (int device = 0; device < EventEncoder::kDevices; device++) {
    DeviceBaseline& d = staging->devices[device];
    if (!staging->device_listed[device] || (d.device_total_bytes && d.has_process_used)) continue;
    uint64_t free_bytes = 0, total_bytes = 0;
    if (!device_usage_baseline(device, &free_bytes, &total_bytes, &d.has_process_used, &d.process_used_bytes)) continue;
    if (!d.device_total_bytes) {
      d.device_free_bytes = free_bytes;
      d.device_total_bytes = total_bytes;
    }
  }
}

// Gathers the baseline: the dormant live set, or the injected tracer's PyTorch snapshot. Maps `staging`'s array.
bool stage_baseline(Staging* staging, TraceOrigin origin, char* why, size_t why_size) {
  staging->capacity = kLiveSetCapacity;
  staging->entries = static_cast<Staged*>(map_zeroed(staging->capacity * sizeof(Staged)));
  if (!staging->entries) return false;
  for (DeviceBaseline& d : staging->devices) d.device = -1;
  for (int i = 0; i < EventEncoder::kDevices; i++) staging->devices[i].device = i;
  if (origin == TraceOrigin::kAttachInjected) {
    if (!injected_live_list(stage_injected, stage_injected_device, read_window_pool_events, staging, why, why_size))
      return false;
  } else {
    live_set_visit_keyed(stage, staging);
  }
  stage_device_figures(staging);
  return true;
}

void unstage(Staging* staging) {
  if (staging->entries) munmap(staging->entries, staging->capacity * sizeof(Staged));
  staging->entries = nullptr;
}

// The output path of an attach or snapshot: `pattern` expanded, else the process's MEMTRACE_OUTPUT.
bool attach_output_path(const char* pattern, char* out, size_t size) {
  if (!pattern || !*pattern) {
    snprintf(out, size, "%s", g_config.output_path);
    return true;
  }
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  return config_expand_output(pattern, getpid(), host, out, size);
}

// Opens the trace of an attach or snapshot and appends its TraceStart (g_flush_lock held; the state is kDormant,
// so no event touches the buffers).
bool begin_attached_trace(const char* pattern, AttachOutcome* out) {
  static char path[4096];
  if (!attach_output_path(pattern, path, sizeof path)) {
    snprintf(out->error, sizeof out->error, "the output path is longer than %zu bytes once expanded", sizeof path - 1);
    return false;
  }
  if (!init_tables_and_buffers()) {
    snprintf(out->error, sizeof out->error, "cannot map the trace's buffers: %s", strerror(errno));
    return false;
  }
  if (!open_trace_file(path, out->error, sizeof out->error)) return false;
  begin_trace(/*live_set_only=*/g_attach_start.origin == TraceOrigin::kSnapshot);
  return true;
}

// After the TraceEnd of a detach or snapshot: closes the file and forgets what was this trace's (as a forked
// child does, on_fork_child), so that the next attach starts a file of its own. g_flush_lock held; kDormant.
void reset_trace_state() {
  g_writer.end();
  pthread_mutex_lock(&g_lock);
  for (ChunkBuffer& b : g_buffers) b.size = 0;
  g_stacks.clear();
  g_recent_stacks.clear();
  g_python_frames.clear();
  g_range_names.clear();
  g_events = g_dropped = g_dropped_reported = g_stackless = g_stackless_reported = 0;
  g_finalizing_marked = false;
  g_end_written = false;
  g_wake_sent = false;
  g_generation.fetch_add(1);  // threads announce their names again, NVML lists are written again
  pthread_mutex_unlock(&g_lock);
  pthread_mutex_lock(&g_module_lock);
  module_map_reset();
  g_modules_arrived = false;
  pthread_mutex_unlock(&g_module_lock);
  g_torch_checked = false;
  g_events_sampled = 0;
}

// The lines of an attach: "memtrace: tracing to PATH" as at a launch.
void print_tracing_line() {
  if (g_config.quiet) return;
  static char line[sizeof g_trace_path + 32];
  const int n = snprintf(line, sizeof line, "memtrace: tracing to %s\n", g_trace_path);
  if (n > 0) write_to_stderr(line, std::min(static_cast<size_t>(n), sizeof line - 1));
}

bool g_injected = false;  // the tracer was loaded into a running process (recorder_start_injected)
}  // namespace

// ---- public --------------------------------------------------------------------------------------------

bool start_trace_once() {
  pthread_mutex_lock(&g_start_lock);
  // A set-uid or set-gid program (the loader marks it AT_SECURE) is left alone entirely.
  if (g_state.load() == kNotStarted && getauxval(AT_SECURE) != 0) transition(LifecycleEvent::kStartFailed);
  if (g_state.load() == kNotStarted) {
    config_load(&g_config);
    if (g_config.start_dormant) start_dormant();
    else start();
    if (g_state.load() == kNotStarted) transition(LifecycleEvent::kStartFailed);
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

// ---- dormant mode and attach ------------------------------------------------------------------------------

bool record_event_not_running(const MemoryEvent& e) {
  for (;;) {
    const TraceState state = g_state.load(std::memory_order_acquire);
    if (state == kRunning) return true;
    if (state == kOff) return false;
    if (state == kDormant) {
      if (note_dormant</*kUnresolved=*/false>(e)) return false;
      continue;  // attached meanwhile: recorded
    }
    start_trace_once();
  }
}

bool trace_dormant() { return g_state.load(std::memory_order_acquire) == kDormant; }

bool note_in_live_set_if_dormant(const MemoryEvent& e) {
  return g_state.load(std::memory_order_acquire) == kDormant && note_dormant</*kUnresolved=*/true>(e);
}

bool note_device_alloc_if_dormant(Api api, uint64_t address, uint64_t size) {
  return MEMTRACE_BENCH_RECORDING() && g_state.load(std::memory_order_acquire) == kDormant &&
         note_dormant_with</*kUnresolved=*/true>([=] { live_set_note_device_alloc(api, address, size); });
}

// At exit a free is recorded after its call, with its result (hook_events.h: FreeEvent): the general path.
bool note_device_free_if_dormant(uint64_t address) {
  return MEMTRACE_BENCH_RECORDING() && g_state.load(std::memory_order_acquire) == kDormant && address != 0 &&
         !g_exited.load(std::memory_order_relaxed) &&
         note_dormant_with</*kUnresolved=*/false>([=] { live_set_note_device_free(address); });
}

bool note_torch_block_if_dormant(uint64_t address, int64_t size_delta, int32_t device) {
  return MEMTRACE_BENCH_RECORDING() && g_state.load(std::memory_order_acquire) == kDormant &&
         note_dormant_with</*kUnresolved=*/false>([=] { live_set_note_torch_block(address, size_delta, device); });
}

bool note_live_set_locked(const MemoryEvent& e) {
  if (g_window) window_note(*g_window, e);
  live_set_note(e);
  return g_state.load(std::memory_order_relaxed) == kRunning;
}

bool recorder_status(char* path, size_t size) {
  if (g_state.load() != kRunning) return false;
  snprintf(path, size, "%s", g_trace_path);
  return true;
}

bool recorder_start_injected() {
  pthread_mutex_lock(&g_start_lock);
  bool started = false;
  if (g_state.load() == kNotStarted && getauxval(AT_SECURE) == 0) {
    config_load(&g_config);
    g_keep_live_set = true;  // no table: only the window and the recheck after a detach
    g_injected = true;
    g_trace_pid = getpid();
    register_exit_handler();
    transition(LifecycleEvent::kStartedDormant);
    // As in dormant mode: a signal that ends the process ends an attached trace and removes the endpoint. The
    // handlers chain to what the process had installed (ending_signals_install keeps it).
    ending_signals_install();
    started = true;
  }
  pthread_mutex_unlock(&g_start_lock);
  return started;
}

// The design (docs/attach.md, "How the switch stays exact"): (a) the file and its TraceStart while still
// dormant; (b) the window opens; (c) the state turns kRunning and every thread still in the dormant path is waited
// for; (d) the baseline is listed; (e) under g_lock the buffer becomes [TraceStart][LiveAtAttach...]
// [AttachBaseline...][the window's records], the window closes and the writer thread starts.
void recorder_attach(const char* output_pattern, TraceOrigin origin, AttachOutcome* out) {
  if (g_state.load() == kRunning && getpid() == g_trace_pid) {
    snprintf(out->error, sizeof out->error, "already attached, tracing to %.400s: detach first", g_trace_path);
    return;
  }
  if (g_state.load() != kDormant || getpid() != g_trace_pid) {
    snprintf(out->error, sizeof out->error, "the tracer is not dormant");
    return;
  }
  InjectedSources sources;
  if (origin == TraceOrigin::kAttachInjected) {
    if (!injected_sources_enable(&sources)) {
      snprintf(out->error, sizeof out->error, "cannot attach: %s",
               sources.why_not[0] ? sources.why_not : "no event source could be turned on");
      return;
    }
    if (sources.cupti_busy) {
      static const char line[] =
          "memtrace: CUPTI already has a subscriber (Kineto, Nsight): attached at the "
          "PyTorch layer only\n";
      write_to_stderr(line, sizeof line - 1);
    }
  }
  Window* window = static_cast<Window*>(map_zeroed(sizeof(Window)));
  if (!window) {
    snprintf(out->error, sizeof out->error, "cannot map the attach window: %s", strerror(errno));
    if (origin == TraceOrigin::kAttachInjected) injected_sources_disable();
    return;
  }
  resolve_live_set();
  window->injected = origin == TraceOrigin::kAttachInjected;
  pthread_mutex_lock(&g_flush_lock);
  // (a)
  const AttachStart previous = g_attach_start;
  g_attach_start = AttachStart{origin, previous.attach_number + 1, sources.driver_layer, sources.torch_layer};
  if (!begin_attached_trace(output_pattern, out)) {
    g_attach_start = previous;
    pthread_mutex_unlock(&g_flush_lock);
    stop_resolving_live_set();
    munmap(window, sizeof(Window));
    if (origin == TraceOrigin::kAttachInjected) injected_sources_disable();
    return;
  }
  // (b)
  pthread_mutex_lock(&g_lock);
  if (sources.cupti_busy) {
    append_notice_locked(NoticeCode::kCuptiBusy,
                         "CUPTI already has a subscriber (Kineto, Nsight): the driver layer is not recorded", 0);
  }
  const size_t start_bytes = g_buffers[g_active].size;
  g_window = window;
  pthread_mutex_unlock(&g_lock);
  // (c)
  transition(LifecycleEvent::kAttached);
  wait_for_dormant_threads();
  // (d)
  static Staging staging;
  staging = Staging{};
  char why[256] = "";
  const bool listed = stage_baseline(&staging, origin, why, sizeof why);
  // (e)
  pthread_mutex_lock(&g_lock);
  g_window = nullptr;
  ChunkBuffer& active = g_buffers[g_active];
  ChunkBuffer& scratch = g_buffers[g_active ^ 1];  // free: no flush ran since the buffers were emptied
  const size_t window_bytes = active.size - start_bytes;
  memcpy(scratch.data, active.data + start_bytes, window_bytes);
  active.size = start_bytes;
  uint64_t not_listed = staging.overflow + window->overflow + live_set_overflow() + live_set_not_followed();
  const bool pool_bytes_add_up = settle_unlisted_pool_bytes(staging, *window);
  bool written = append_baseline_records_locked(staging, window, not_listed);
  if (written && !listed && why[0]) {
    append_notice_locked(NoticeCode::kAttachIncomplete, why, 0);
  }
  if (written && !pool_bytes_add_up) {
    append_notice_locked(NoticeCode::kAttachIncomplete,
                         "the pool blocks allocated before attach do not add up: the events of the attach window "
                         "move more than PyTorch's allocated bytes held",
                         0);
  }
  if (written && active.size + window_bytes > g_config.buffer_bytes) {
    written = g_writer.write_chunk(active.data, active.size);
    active.size = 0;
  }
  if (written) {
    memcpy(active.data + active.size, scratch.data, window_bytes);
    active.size += window_bytes;
    g_append_hint.store(active.data + active.size, std::memory_order_relaxed);
  }
  pthread_mutex_unlock(&g_lock);
  unstage(&staging);
  munmap(window, sizeof(Window));
  if (!written) report_write_failure();
  print_tracing_line();
  g_writer.start_thread(recorder_flush, g_config.flush_interval_ms);
  pthread_mutex_unlock(&g_flush_lock);
  out->ok = true;
  snprintf(out->path, sizeof out->path, "%s", g_trace_path);
}

void recorder_detach(AttachOutcome* out) {
  if (g_state.load() != kRunning || g_attach_start.origin == TraceOrigin::kLaunch || getpid() != g_trace_pid) {
    snprintf(out->error, sizeof out->error, "%s",
             g_state.load() == kDormant ? "not attached" : "this trace was not started by attach");
    return;
  }
  g_writer.stop_thread();
  sample_devices(/*always=*/true);
  pthread_mutex_lock(&g_flush_lock);
  // Under g_lock: a thread past record_event's state check appends before this, or finds kDormant once it has
  // the lock (note_live_set_locked) and only notes the live set.
  pthread_mutex_lock(&g_lock);
  transition(LifecycleEvent::kDetached);
  pthread_mutex_unlock(&g_lock);
  // Every entry has its device: those from before the attach were resolved then, the rest came from the trace's
  // events. Dormant hooks may leave them unresolved again.
  stop_resolving_live_set();
  finish_locked(EndHow::kDetach, 0);
  print_end_line_after_detach();
  snprintf(out->path, sizeof out->path, "%s", g_trace_path);
  reset_trace_state();
  pthread_mutex_unlock(&g_flush_lock);
  if (g_injected) injected_sources_disable();
  out->ok = true;
}

void recorder_snapshot(const char* output_pattern, AttachOutcome* out) {
  if (g_state.load() == kRunning && getpid() == g_trace_pid) {
    snprintf(out->error, sizeof out->error,
             "attached, tracing to %.380s (which holds the live set at attach and every event since): a snapshot "
             "is taken after detach",
             g_trace_path);
    return;
  }
  if (g_state.load() != kDormant || getpid() != g_trace_pid) {
    snprintf(out->error, sizeof out->error, "the tracer is not dormant");
    return;
  }
  pthread_mutex_lock(&g_flush_lock);
  const AttachStart previous = g_attach_start;
  g_attach_start = AttachStart{TraceOrigin::kSnapshot, 0, false, false};
  const bool begun = begin_attached_trace(output_pattern, out);
  g_attach_start = previous;
  if (!begun) {
    pthread_mutex_unlock(&g_flush_lock);
    return;
  }
  static Staging staging;
  staging = Staging{};
  char why[256] = "";
  resolve_live_set();
  const bool listed = stage_baseline(&staging, g_injected ? TraceOrigin::kAttachInjected : TraceOrigin::kAttachDormant,
                                     why, sizeof why);
  stop_resolving_live_set();
  pthread_mutex_lock(&g_lock);
  bool written = append_baseline_records_locked(staging, nullptr,
                                                staging.overflow + live_set_overflow() + live_set_not_followed());
  if (written && !listed && why[0]) append_notice_locked(NoticeCode::kAttachIncomplete, why, 0);
  pthread_mutex_unlock(&g_lock);
  unstage(&staging);
  if (written) {
    // finish_locked's chunks are written while the state is not kOff: kDormant here.
    finish_locked(EndHow::kSnapshotDone, 0);
    print_end_line_after_detach();
    out->ok = true;
    snprintf(out->path, sizeof out->path, "%s", g_trace_path);
  } else {
    snprintf(out->error, sizeof out->error, "writing %.400s failed: %s", g_trace_path, strerror(errno));
  }
  reset_trace_state();
  pthread_mutex_unlock(&g_flush_lock);
}

}  // namespace memtrace
