// The recorder's hot path: turns what a hook saw into trace records. It owns the trace's state: the settings,
// the two chunk buffers (one filling, one being written), the stack and Python-frame intern tables and the
// background writer (record/recorder_state.h).
//
// Nothing starts before the first hook calls record_event(): no thread, no file. The first call starts the
// trace (record/lifecycle.h: reads the settings, creates the file, starts the writer thread).
#pragma once
#include <cstddef>
#include <cstdint>

#include "record/nvml_list.h"
#include "record/schema.h"
#include "record/tls.h"

namespace memtrace {

// What a hook observed. Sizes in bytes; device is the CUDA device ordinal (-1 when unknown).
struct MemoryEvent {
  EventKind kind = EventKind::kUnknown;
  Layer layer = Layer::kUnknown;
  Api api = Api::kUnknown;
  int32_t device = -1;
  uint64_t stream = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  int32_t result = 0;
  uint64_t allocator_allocated_bytes = 0;
  uint64_t allocator_reserved_bytes = 0;
  uint64_t device_free_bytes = 0;
  uint64_t device_total_bytes = 0;
  uint64_t handle = 0;
  Memory memory = Memory::kDevice;
  uint64_t graph = 0;  // graph memory nodes (see Event.graph in memtrace.proto)
  uint64_t capture_id = 0;
  bool has_process_usage = false;  // NVML answered: the two figures below are present
  uint64_t process_used_bytes = 0;
  uint64_t other_processes_used_bytes = 0;
  uint64_t context = 0;  // driver-layer ALLOC: the current CUcontext
};

// MemoryEvent.device of an allocation whose device and context the hook did not look up: a dormant process's
// plain device allocation (note_in_live_set_if_dormant). Never recorded in a trace.
constexpr int32_t kDeviceUnresolved = -2;

// Records one event with the calling thread's stack (for allocations and OOMs). Thread-safe; never throws;
// takes the recorder's lock only after the stack is captured. A no-op when tracing is off.
void record_event(const MemoryEvent& event);

// A dormant process's allocation `event` (MEMTRACE_START=dormant, docs/attach.md), with device kDeviceUnresolved
// and no context: noted in the live set, which asks the driver for both from the address when an attach or
// snapshot reads it (attach/live_set.h: live_set_resolve), so that the hook need not ask on every allocation.
// True when noted. False when the caller must look them up and record the event with record_event: the trace
// runs or has not started, or an attach is resolving the set now. Only for memory whose device and context the
// driver's pointer attributes name (resolver.cc: device_and_context_of_pointer). Thread-safe, lock-free.
bool note_in_live_set_if_dormant(const MemoryEvent& event);
// Whether the state is dormant now: the test before an event is made for note_in_live_set_if_dormant, which decides.
bool trace_dormant();

// The dormant path of the two commonest events, without a MemoryEvent or the general helpers: a plain device
// allocation of the driver layer (cudaMalloc, cuMemAlloc: `address`, `size` bytes, noted unresolved as
// note_in_live_set_if_dormant does) and the free of a driver pointer (cudaFree, cuMemFree; it frees the pool block
// at `address` when no driver pointer is live there). True when noted; false when the caller must take the general
// path: not dormant, an attach resolving the set (allocation), the process exiting (free: recorded after the call).
bool note_device_alloc_if_dormant(Api api, uint64_t address, uint64_t size);
bool note_device_free_if_dormant(uint64_t address);
// The same for a PyTorch block (c10_hooks.cc): allocated when `size_delta` > 0, else freed, on `device`.
bool note_torch_block_if_dormant(uint64_t address, int64_t size_delta, int32_t device);

// Records a DEVICE_USAGE `event` (no stack) with NVML's list of the other processes on its device: `others`
// (`count` <= kMaxNvmlProcesses, ascending pids; nullptr with `list_known` false where NVML's list gave no
// figures). An NvmlProcesses record goes right before the event when the list differs from the one last written
// for the device in this trace (memtrace.proto), in the same locked section so that nothing comes between them.
// Apart from record_event so that the hot path carries neither the list nor a test for it. From the writer
// thread's samples and the OOM path; never allocates. A no-op when tracing is off.
void record_device_usage(const MemoryEvent& event, bool list_known, const NvmlOtherProcess* others, unsigned count);

// Writes a Device record (memtrace.proto) for device `ordinal`: its 16-byte `uuid`, `name` (may be empty) and
// `total_bytes` (0 = unknown). From the hook thread that first sees the device, before that event is recorded;
// never with the recorder's lock held. Dropped when the filling buffer has no room. A no-op when tracing is off.
void record_device(int ordinal, const uint8_t (&uuid)[16], const char* name, uint64_t total_bytes);

// Records one NVTX call of the calling thread (a RangeEvent record, memtrace.proto): `kind`, `name` (`name_len`
// bytes of UTF-8, cut here to 255 at a UTF-8 boundary; nullptr or 0 bytes for none), interned as a RangeName
// the first time it is seen, and `range_id` (kStart / kEnd). Only while the trace runs: it never starts the trace
// (NVTX calls before the first CUDA call are not recorded). Thread-safe; never throws, never allocates. A record
// that finds no room in the buffer counts as a dropped event (Notice EVENTS_DROPPED).
constexpr size_t kMaxRangeNameBytes = 255;
void record_range(RangeKind kind, const char* name, size_t name_len, uint64_t range_id);

// Marks the calling thread as inside a hook for the scope's lifetime. An allocation is recorded once, by the
// outermost hook that sees it (cudaMalloc of the shared runtime reaches the driver's cuMemAlloc through our
// resolver wrapper too; only the runtime call is recorded).
// Inline: every hook takes one, and a nested hook (the driver call inside the runtime's) does nothing else.
extern MEMTRACE_TLS int t_hook_depth;
class HookScope {
 public:
  HookScope() : outermost_(t_hook_depth++ == 0) {}
  ~HookScope() { t_hook_depth--; }
  bool outermost() const { return outermost_; }

 private:
  bool outermost_;
};

// Inside another hook on this thread: a hook that records only when outermost may forward at once, without a scope
// (whatever its real call reaches is nested still).
inline bool nested_in_hook() { return t_hook_depth != 0; }

}  // namespace memtrace
