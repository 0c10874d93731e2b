#include "record/recorder.h"

#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "measure/bench_toggle.h"
#include "measure/phase_cycles.h"
#include "record/clients.h"
#include "record/recorder_state.h"
#include "stacks/stack_capture.h"

namespace memtrace {

// ---- state (declared, and why it is laid out so, in recorder_state.h) -------------------------------------

constinit ReadMostlyState g_read_mostly;
pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
Config g_config;
constinit EventState g_event_state;
alignas(64) constinit EventEncoder g_encoder;
InternTable g_stacks;
RecentIds<4096> g_recent_stacks;
InternTable g_python_frames;
InternTable g_range_names;
uint64_t g_start_ns = 0;
pthread_mutex_t g_flush_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_module_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_modules_arrived = false;
TraceWriter g_writer;
uint64_t g_dropped_reported = 0;
uint64_t g_stackless_reported = 0;
bool g_torch_checked = false;
bool g_python_notice_written = false;
std::atomic<bool> g_exited{false};
pid_t g_trace_pid = 0;
char g_trace_path[4096];
PythonSupport g_python_support = PythonSupport::kAbsent;
uint32_t g_python_hex = 0;
MEMTRACE_TLS uint32_t t_tid;
MEMTRACE_TLS bool t_holds_lock;
MEMTRACE_TLS bool t_never_waits;

MEMTRACE_TLS int t_hook_depth;

namespace {
MEMTRACE_TLS uint32_t t_announced_generation;
}  // namespace

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

uint32_t current_tid() {
  if (!t_tid) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

}  // namespace

// ---- appending records (g_lock held) -------------------------------------------------------------------

size_t utf8_prefix(const char* s, size_t len, size_t max) {
  if (len <= max) return len;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) n--;
  return n;
}

bool append_notice_locked(NoticeCode code, const char* message, uint64_t count) {
  uint8_t buf[600];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(code));
  w.bytes(2, message, utf8_prefix(message, strlen(message), 512));
  w.uint(3, count);
  return append_record_locked(field::kNotice, w);
}

namespace {

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
  w.uint(5, stack.python_from_backward);
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

// ---- public --------------------------------------------------------------------------------------------

namespace {

NvmlListTable g_nvml_lists;  // g_lock

// Writes `device`'s NvmlProcesses record when its list changed; false when the record found no room.
bool append_nvml_processes_locked(int device, const NvmlOtherProcess* others, unsigned count) {
  const uint32_t generation = g_generation.load(std::memory_order_relaxed);
  if (!g_nvml_lists.changed(device, others, count, generation)) return true;
  uint8_t buf[kMaxNvmlProcessesRecordBytes];
  ProtoWriter w(buf, buf + sizeof buf);
  encode_nvml_processes(device, others, count, w);
  if (!append_record_locked(field::kNvmlProcesses, w)) return false;
  g_nvml_lists.remember(device, others, count, generation);
  return true;
}

}  // namespace

void record_device_usage(const MemoryEvent& e, bool list_known, const NvmlOtherProcess* others, unsigned count) {
  if (!MEMTRACE_BENCH_RECORDING()) return;
  if (!trace_running()) return;
  if (count > kMaxNvmlProcesses) count = kMaxNvmlProcesses;
  device_usage_note_device(e.device);
  pthread_mutex_lock(&g_lock);
  t_holds_lock = true;
  if (g_end_written) g_end_written = false;  // as in record_event
  if (t_announced_generation != g_generation.load(std::memory_order_relaxed)) append_thread_info_locked();
  // A list that found no room is not written, and neither is its sample: the reader would take the sample for
  // one of the list written before.
  if (list_known && !append_nvml_processes_locked(e.device, others, count)) {
    drop_event_locked();
  } else if (!append_event_locked(e, 0)) {
    if (g_config.wait_when_full && !t_never_waits) wait_for_room_locked(e, 0);
    else drop_event_locked();
  }
  wake_writer_if_filling_locked();
  t_holds_lock = false;
  pthread_mutex_unlock(&g_lock);
}

void record_device(int ordinal, const uint8_t (&uuid)[16], const char* name, uint64_t total_bytes) {
  if (!trace_running() || ordinal < 0) return;
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

namespace {

// FNV-1a over the bytes, then a final mix: the RangeName table's key (0 is reserved, see InternTable::find).
uint64_t range_name_key(const char* name, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ static_cast<unsigned char>(name[i])) * 0x100000001b3ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h ? h : 1;
}

// The RangeName id of `name`, writing the record the first time; 0 for no name, a full table or no room.
uint64_t intern_range_name_locked(const char* name, size_t len) {
  if (len == 0) return 0;
  const uint64_t key = range_name_key(name, len);
  if (uint64_t id = g_range_names.find(key)) return id;
  if (g_range_names.full()) return 0;
  uint8_t buf[kMaxRangeNameBytes + 16];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, g_range_names.next_id());
  w.bytes(2, name, len);
  if (!append_record_locked(field::kRangeName, w)) return 0;
  return g_range_names.insert(key);
}

}  // namespace

void record_range(RangeKind kind, const char* name, size_t name_len, uint64_t range_id) {
  // Never starts the trace: an NVTX call is not a CUDA call (recorder.h).
  if (g_state.load(std::memory_order_acquire) != kRunning) return;
  if (!name) name_len = 0;
  name_len = utf8_prefix(name, name_len, kMaxRangeNameBytes);
  const uint64_t now = now_ns();
  const uint64_t t_us = now > g_start_ns ? (now - g_start_ns) / 1000 : 0;  // as Event times (memtrace.proto)
  pthread_mutex_lock(&g_lock);
  t_holds_lock = true;
  if (t_announced_generation != g_generation.load(std::memory_order_relaxed)) append_thread_info_locked();
  uint8_t buf[64];
  ProtoWriter w(buf, buf + sizeof buf);
  w.uint(1, static_cast<uint64_t>(kind));
  w.uint(2, intern_range_name_locked(name, name_len));
  w.uint(3, current_tid());
  w.uint(4, t_us);
  w.uint(5, range_id);
  if (!append_record_locked(field::kRangeEvent, w)) drop_event_locked();
  wake_writer_if_filling_locked();
  t_holds_lock = false;
  pthread_mutex_unlock(&g_lock);
}

void record_event(const MemoryEvent& e) {
  if (!MEMTRACE_BENCH_RECORDING()) return;
  // As trace_running(), with kDormant's live set behind the same one test of a running trace.
  if (g_state.load(std::memory_order_acquire) != kRunning && !record_event_not_running(e)) return;
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
  if (__builtin_expect(g_keep_live_set, false) && !note_live_set_locked(e)) {
    t_holds_lock = false;
    pthread_mutex_unlock(&g_lock);
    return;
  }
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
    if (g_config.wait_when_full && !t_never_waits) wait_for_room_locked(e, stack_id);
    else drop_event_locked();
  }
  wake_writer_if_filling_locked();
  MEMTRACE_PHASE(kAppended);
  t_holds_lock = false;
  pthread_mutex_unlock(&g_lock);
  MEMTRACE_PHASE(kUnlocked);
}

}  // namespace memtrace
