// Replays trace events, in file order, into per-device memory totals, peaks, live allocations, OOM
// events and trace-health counts. Memory use is bounded by the number of allocations live at once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memtrace.pb.h"
#include "model/block_index.h"
#include "model/first_allocation_times.h"
#include "model/live_allocation.h"
#include "model/live_table.h"
#include "model/segment_map.h"
#include "read/event_fields.h"
#include "util/checked_math.h"
#include "util/flat_hash_map.h"

namespace memtrace {

// The three per-device totals (see DeviceState::totals for what each one means).
struct DeviceTotals {
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t driver_bytes = 0;
  bool operator==(const DeviceTotals&) const = default;
};

// The first moment a total reached its maximum.
struct Peak {
  uint64_t bytes = 0;
  int64_t time_ns = 0;
  // The event that raised it; with at_attach, the event before which it was reached.
  uint64_t event_index = 0;
  // Reached by the records of what was live at attach (LiveAtAttach, AttachBaseline), which come before the event
  // at event_index (the first event, as the tracer writes them): the peak is the state before that event is
  // applied, not after it. A replay looks there (model/replay.h, ReplayMoment).
  bool at_attach = false;
};

// Free space inside the reserved memory of one device (see MemoryModel::fragmentation).
struct Fragmentation {
  uint64_t reserved_minus_allocated_bytes = 0;  // DeviceTotals reserved - allocated (0 if allocated is larger)
  // Segments: PyTorch's, rebuilt from addresses (driver-layer device allocations that have held a
  // PyTorch block, and for expandable segments the contiguous mapped ranges of one address reservation).
  uint64_t segment_count = 0;
  // The largest gap between live PyTorch blocks inside one segment (segment head and tail included):
  // the largest allocation the allocator could serve without asking the driver for more.
  uint64_t largest_free_block_bytes = 0;
  // False where segments cannot be rebuilt (no PyTorch blocks on the device: stream-ordered pools
  // keep their layout to themselves); segment_count and largest_free_block_bytes are 0 then.
  bool segments_known = false;
  bool operator==(const Fragmentation&) const = default;
};

// A DEVICE_USAGE sample (NVML or cuMemGetInfo) of one device.
struct DeviceUsage {
  int64_t time_ns = 0;  // since trace start
  uint64_t device_free_bytes = 0;
  uint64_t device_total_bytes = 0;
  std::optional<uint64_t> process_used_bytes;          // this process as NVML sees it; absent without NVML
  std::optional<uint64_t> other_processes_used_bytes;  // every other process on the device
  proto::Api api = proto::API_UNKNOWN;                 // NVML_SAMPLE, or the API of the OOM it follows
  // What the events account for at that moment: DeviceTotals::driver_bytes. process_used_bytes minus
  // this is the context and everything no API reports ("context and unattributed").
  uint64_t accounted_bytes = 0;
  // process_used_bytes - accounted_bytes, 0 when negative or when NVML gave no process figure.
  uint64_t unattributed_bytes() const {
    return process_used_bytes && *process_used_bytes > accounted_bytes ? *process_used_bytes - accounted_bytes : 0;
  }
};

// Which layers a device shows over a whole trace, learnt by an earlier pass, so that a replay's running
// totals mean from the first event what they mean at the end.
struct LayerHint {
  bool block_layer = false;
  bool allocator_layer = false;
};

struct DeviceState {
  int32_t device = -1;
  // Live LAYER_DRIVER device memory (cudaMalloc, cuMemAlloc, cuMemCreate handles on the device): not
  // managed, host, array or imported memory.
  uint64_t driver_layer_bytes = 0;
  uint64_t pool_block_bytes = 0;   // live stream-ordered pool blocks (cudaMallocAsync..., graph memory)
  uint64_t torch_block_bytes = 0;  // live PyTorch caching-allocator blocks
  // allocator_reserved_bytes of the latest TORCH_ALLOCATOR event, less the segments PyTorch gave back to the
  // driver since (torch.cuda.empty_cache() frees segments without a report: see release_torch_segment).
  uint64_t torch_reserved_bytes = 0;
  // Categories, each reported on its own (memtrace.proto enum Memory).
  uint64_t array_bytes = 0;        // CUDA arrays (device memory, in driver_bytes)
  uint64_t managed_bytes = 0;      // managed memory made on this device's context (charged to no device)
  uint64_t imported_bytes = 0;     // IPC / external / shareable-handle imports (never this process's memory)
  uint64_t graph_block_bytes = 0;  // live graph memory-node allocations (part of pool_block_bytes)
  // Latest POOL_RESERVED samples: the sum over this device's stream-ordered pools, and the graph
  // memory pool (address 0). Part of driver_bytes once sampled.
  uint64_t pool_reserved_sampled_bytes = 0;
  uint64_t graph_reserved_bytes = 0;
  bool block_layer_seen = false;      // any LAYER_BLOCK event on this device
  bool allocator_layer_seen = false;  // any TORCH_ALLOCATOR event on this device
  // A TORCH_ALLOCATOR event of this device was applied (allocator_layer_seen may come from a hint instead): from
  // then on PyTorch's own reports give torch_reserved_bytes, not the AttachBaseline.
  bool torch_totals_reported = false;
  // PyTorch's cudaMallocAsync backend at attach: torch.cuda.memory_reserved() (AttachBaseline) is its pools'
  // reserved memory, standing in pool_reserved_sampled_bytes until the device's first POOL_RESERVED sample.
  uint64_t attach_pool_reserved_bytes = 0;
  // The trace's own allocations and their frees: not what was live at attach, nor its frees (AttachFacts).
  uint64_t driver_allocations = 0, driver_frees = 0, block_allocations = 0, block_frees = 0;
  uint64_t context_destroys = 0;     // CONTEXT_DESTROY events (cuCtxDestroy, cudaDeviceReset...)
  uint64_t context_freed_bytes = 0;  // bytes those events freed (charged or not), summed
  // Peaks of the raw quantities; which of them is "allocated" and "reserved" depends on the layers
  // the device has seen over the whole trace (see peak_allocated / peak_reserved).
  Peak peak_driver;          // of driver_bytes
  Peak peak_blocks;          // of torch_block_bytes + pool_block_bytes
  Peak peak_torch_reserved;  // of torch_reserved_bytes
  Peak peak_array, peak_managed, peak_imported;
  Peak peak_graph;           // of graph_bytes()
  Peak peak_pools_reserved;  // of pools_reserved_bytes()
  // DEVICE_USAGE: the latest sample, and the one with the highest process_used_bytes (or, without
  // NVML, the lowest device_free_bytes).
  std::optional<DeviceUsage> last_usage;
  std::optional<DeviceUsage> peak_usage;

  // The peaks of the totals below, with "ever seen" meaning over the whole trace: the driver segment
  // PyTorch allocates before its first block report does not count as allocated memory.
  Peak peak_allocated() const { return block_layer_seen ? peak_blocks : peak_driver; }
  Peak peak_reserved() const { return allocator_layer_seen ? peak_torch_reserved : peak_driver; }

  // What the device's stream-ordered pools (graph memory pool included) hold from the driver: the sum
  // of their latest POOL_RESERVED samples, or the live pool blocks where they are more (a pool's blocks
  // live inside its reserved memory, so before a pool's first sample its blocks stand in for it).
  uint64_t pools_reserved_bytes() const {
    uint64_t sampled = saturating_add(pool_reserved_sampled_bytes, graph_reserved_bytes);
    return std::max(sampled, pool_block_bytes);
  }
  // Graph memory: the graph pool's latest sample, or its live blocks where they are more.
  uint64_t graph_bytes() const {
    return graph_reserved_bytes > graph_block_bytes ? graph_reserved_bytes : graph_block_bytes;
  }

  // driver: everything this process holds from CUDA on the device (driver-layer device memory,
  //   arrays, and what its pools reserve). allocated: live blocks once the device has a block layer
  //   (then it equals torch.cuda.memory_allocated()), else driver. reserved: PyTorch's own reserved
  //   total once its allocator has reported on this device (torch.cuda.memory_reserved()), else driver.
  DeviceTotals totals() const { return totals(layers()); }
  // The totals as they would be with `layers` seen instead of this device's own.
  DeviceTotals totals(LayerHint layers) const {
    DeviceTotals t;
    t.driver_bytes = saturating_add(saturating_add(driver_layer_bytes, array_bytes), pools_reserved_bytes());
    t.allocated_bytes = layers.block_layer ? blocks_bytes() : t.driver_bytes;
    t.reserved_bytes = layers.allocator_layer ? torch_reserved_bytes : t.driver_bytes;
    return t;
  }
  LayerHint layers() const { return LayerHint{block_layer_seen, allocator_layer_seen}; }
  // Live blocks of both kinds: PyTorch's and stream-ordered pools' (saturating: sizes come from the file).
  uint64_t blocks_bytes() const { return saturating_add(torch_block_bytes, pool_block_bytes); }
  // Whether `a` counts towards this device's allocated total (the "allocated kind").
  bool counts_as_allocated(const LiveAllocation& a) const {
    if (!a.charged_to_device() || a.device != device) return false;
    // Without a block layer, allocated = driver, which includes pool blocks (none exist then anyway). With one,
    // a block of array memory (a block-layer event of an array API: only a damaged trace has one) is charged to
    // the arrays, in driver (MemoryModel::charge goes by the memory first): not a block.
    return block_layer_seen ? is_block_space(a.space) && a.memory == proto::MEMORY_DEVICE : true;
  }
  // Whether `a`, live at exit, is a leak candidate. Where PyTorch's allocator reports, its blocks are;
  // the driver memory under them is the allocator's cache (reserved), not something the program
  // kept. Elsewhere every charged allocation is: a cudaMalloc nobody freed is kept memory even on a
  // device that also uses pool blocks.
  bool counts_as_leak(const LiveAllocation& a) const;
};

// Memory that belongs to the process, not to one device: host memory is never charged to a GPU, and
// a virtual address reservation (cuMemAddressReserve) is address space in the unified address space.
struct ProcessTotals {
  uint64_t host_pinned_bytes = 0;             // MEMORY_HOST_PINNED (cudaMallocHost, cuMemHostAlloc, host cuMemCreate)
  uint64_t host_registered_bytes = 0;         // MEMORY_HOST_REGISTERED (cudaHostRegister: existing host memory)
  uint64_t address_space_reserved_bytes = 0;  // live cuMemAddressReserve ranges; never memory
  Peak peak_host_pinned, peak_host_registered, peak_address_space_reserved;
};

struct OomEvent {
  uint64_t requested_bytes = 0;
  int32_t device = -1;
  uint64_t device_free_bytes = 0;
  uint64_t device_total_bytes = 0;
  uint64_t stack_id = 0;
  int64_t time_ns = 0;
  proto::Api api = proto::API_UNKNOWN;
  proto::Layer layer = proto::LAYER_UNKNOWN;
  int32_t result = 0;
  // Failed driver allocations of the same thread folded into this allocator-level OOM: PyTorch's
  // allocator asks the driver for a segment (and again after emptying its cache) before it reports
  // the OOM itself, so one failed tensor allocation is seen at both layers and is listed once.
  uint32_t driver_attempts = 0;
  uint32_t tid = 0;
};

// CUDA_ERROR_DEINITIALIZED (driver API) and cudaErrorCudartUnloading (runtime API) are both 4: the
// result of a free made while the process tears CUDA down (cuda.h, driver_types.h).
inline constexpr int32_t kTeardownFreeResult = 4;

// Where one of the replay's figures contradicts a figure the trace reports (TraceHealth): how many
// events showed it, and the first of them.
struct FigureMismatch {
  uint64_t events = 0;       // events after which the two figures disagreed
  uint64_t event_index = 0;  // the first of them (MemoryModel::next_event_index() when it was applied)
  int64_t time_ns = 0;
  int32_t device = -1;
  uint64_t replay_bytes = 0;  // the replay's figure there
  uint64_t trace_bytes = 0;   // the figure it is checked against there
};

// The device ordinals the replay keeps state for: -1 (unknown) and 0..kMaxDeviceOrdinal. The tracer
// writes a CUDA device ordinal, 0..cudaGetDeviceCount() - 1, and a host holds at most a few dozen GPUs,
// so 1,024 ordinals leave a wide margin while bounding the per-device state (DeviceState, its call-site
// times, its last totals: a few KiB each) that a file naming a new ordinal in every event would otherwise
// make grow with every event. Events of other ordinals are counted (TraceHealth::events_with_bad_device)
// and not replayed.
inline constexpr int32_t kMaxDeviceOrdinal = 1023;
inline bool valid_device_ordinal(int32_t device) { return uint32_t(device) + 1u <= uint32_t(kMaxDeviceOrdinal) + 1u; }

struct TraceHealth {
  uint64_t events = 0;                    // events applied (MemoryModel::next_event_index())
  uint64_t unknown_frees = 0;             // free of an address never seen allocated
  uint64_t double_frees = 0;              // free of an address already freed and not allocated again
  uint64_t duplicate_allocations = 0;     // allocation at an address that was still live (old one dropped)
  uint64_t error_result_allocations = 0;  // ALLOC with result != 0 (not charged; the tracer writes OOM instead)
  uint64_t failed_frees = 0;              // FREE with a result other than 0 and kTeardownFreeResult
  // FREE answered with kTeardownFreeResult: the process was exiting and the driver had already released
  // the memory with its context. Counted as freed, and here.
  uint64_t teardown_frees = 0;
  uint64_t backward_timestamps = 0;  // events whose time is before the previous event's
  uint64_t ooms_not_listed = 0;      // OOM events beyond the first kMaxOomsListed (counted only)
  uint64_t managed_allocations = 0;
  uint64_t maps = 0, unmaps = 0, address_reserves = 0, address_frees = 0;
  uint64_t unknown_graph_launches = 0;  // GRAPH_LAUNCH of an executable graph never seen instantiated
  uint64_t graph_nodes_not_kept = 0;    // graph memory nodes beyond kMaxGraphNodes (not replayed at launch)
  uint64_t pool_samples = 0, device_usage_samples = 0;
  // Events whose device is not an ordinal the tracer writes (valid_device_ordinal): not replayed.
  uint64_t events_with_bad_device = 0;
  // GRAPH_LAUNCH events whose memory nodes were not replayed: past MemoryModel's budget of node replays.
  uint64_t graph_launches_not_replayed = 0;
  uint64_t graph_instantiations_not_kept = 0;  // GRAPH_INSTANTIATE beyond kMaxGraphExecs (their launches: unknown)
  // Values no tracer writes (checked_math.h): events with a size or allocator total of kMaxPlausibleBytes or
  // more, and records (events, TraceEnd) whose time delta is beyond kMaxPlausibleDeltaNs either way.
  // They are applied, with saturating arithmetic.
  uint64_t implausible_sizes = 0;
  uint64_t implausible_time_deltas = 0;
  // At TORCH_ALLOCATOR events that carry PyTorch's allocated total (Event.allocator_allocated_bytes: where
  // the file writes it, or every one where the reader derives it), the replay's live PyTorch blocks of
  // the device against it: a lost or misread event makes them disagree.
  FigureMismatch allocated_vs_pytorch;
  // After TORCH_ALLOCATOR events: the replay's live PyTorch blocks above PyTorch's reserved total, which
  // its allocator never lets happen (replay_bytes: allocated, trace_bytes: reserved).
  FigureMismatch allocated_above_reserved;
  // Attached traces: the replay's live PyTorch blocks of a device once its AttachBaseline is read (what the
  // LiveAtAttach records rebuilt) against the baseline's allocator_allocated_bytes (torch.cuda.memory_allocated()
  // at attach).
  FigureMismatch allocated_vs_attach_baseline;
  // Frees of an address the replay did not know that were taken from an aggregate of blocks live at attach
  // whose addresses were not listed (LiveAtAttach.blocks_unknown): not unknown frees.
  uint64_t frees_of_unlisted_before_attach = 0;
  // LiveAtAttach records after the file's first Event (the tracer writes them all before it): applied as live
  // from their place in the file.
  uint64_t live_at_attach_after_events = 0;
  // LiveAtAttach and AttachBaseline records of a device that is not an ordinal the tracer writes: not applied.
  uint64_t attach_records_with_bad_device = 0;
};

// What the trace said of one device at attach (LiveAtAttach, AttachBaseline records).
struct AttachFacts {
  // LiveAtAttach records of the device's memory (MEMORY_DEVICE, MEMORY_ARRAY) with an address, and their sizes
  // summed (saturating): blocks (LAYER_BLOCK: PyTorch's, stream-ordered pools') and the rest (driver allocations:
  // PyTorch's segments among them, which hold its blocks). Address reservations and host memory are not counted.
  uint64_t block_allocations = 0;
  uint64_t block_bytes = 0;
  uint64_t driver_allocations = 0;
  uint64_t driver_bytes = 0;
  // Of those, freed in the trace (not counted in DeviceState's frees, which are of the trace's own allocations).
  uint64_t block_frees = 0;
  uint64_t driver_frees = 0;
  uint64_t unlisted_bytes = 0;                    // blocks_unknown aggregates, summed
  std::optional<proto::AttachBaseline> baseline;  // the device's AttachBaseline, the last one read

  // What was allocated before attach, of the allocated kind: the blocks where there are any (listed or not: the
  // driver allocations then hold them), else the driver allocations. Bytes include the blocks_unknown aggregates.
  bool blocks_allocated() const { return block_allocations || unlisted_bytes; }
  uint64_t allocated_allocations() const { return blocks_allocated() ? block_allocations : driver_allocations; }
  uint64_t allocated_bytes() const {
    return blocks_allocated() ? saturating_add(block_bytes, unlisted_bytes) : driver_bytes;
  }
};

// Every device's AttachFacts summed (sizes saturating; no baseline): what the reports say of the whole process.
AttachFacts sum_attach_facts(const std::map<int32_t, AttachFacts>& facts);

// Allocations made before attach still live at the end (at the leak window's moment, as live_at_exit), of one
// layer on one device, among those that would be leak candidates (DeviceState::counts_as_leak): the reports
// list them apart from call sites, as they have no stack.
struct BeforeAttachLive {
  int32_t device = -1;
  proto::Layer layer = proto::LAYER_UNKNOWN;  // LAYER_BLOCK or LAYER_DRIVER
  uint64_t allocations = 0;
  uint64_t bytes = 0;
  uint64_t unlisted_bytes = 0;  // what is left of the layer's blocks_unknown aggregate (no allocation count)
};

// The ALLOC event a LiveAtAttach record stands for (its layer, api, device, stream, address, size and memory): what
// the model charges it as, and what the exports write of it.
EventFields alloc_event_of(const proto::LiveAtAttach& live);

class MemoryModel {
 public:
  void set_layer_hints(std::map<int32_t, LayerHint> hints) { hints_ = std::move(hints); }
  std::map<int32_t, LayerHint> layer_hints() const;

  using TotalsCallback = std::function<void(int32_t device, int64_t time_ns, const DeviceTotals&)>;

  // Called after every event that changes a device's totals (and after a device's first event). Set it
  // before the first apply(): without one, changes are not followed. The attach records' changes are called once,
  // with the state after the last of them (notify_attach_totals), not record by record.
  void set_totals_callback(TotalsCallback callback) { on_totals_changed_ = std::move(callback); }
  // Calls the totals callback for the devices whose totals the attach records (LiveAtAttach, AttachBaseline)
  // changed since the last event, at their time: what was live at attach, all of it. apply() calls it before the
  // next event, apply_end() and finish() too; a replay calls it before it lets its observer see the next event, and
  // after the last record (model/replay.h), so that a trace without events has its row.
  void notify_attach_totals() {
    if (!attach_totals_held_.empty()) notify_held_attach_totals();
  }

  // Applies the next Event of the file.
  void apply(const EventFields& event);
  // TraceEnd carries the time of the end of the trace.
  void apply_end(const proto::TraceEnd& end);
  // A trace that began by attach (TraceStart.origin). One allocation live at attach (proto LiveAtAttach): live
  // from now (time 0 where it comes before the first Event, as the tracer writes it), marked before_attach, with
  // no stack, charged to its device as an ALLOC of its layer, api and memory would be. One of `blocks_unknown`
  // adds `size` bytes of its layer to the device without an address: a later free of an address the replay
  // does not know, of that layer and device, takes its size from them (up to what is left) rather than
  // counting as an unknown free. Sizes saturate; a record of an invalid device is counted and not applied.
  void apply_live_at_attach(const proto::LiveAtAttach& live);
  // A device's totals at attach (proto AttachBaseline): PyTorch's reserved total stands for the device's
  // reserved total until its first TORCH_ALLOCATOR event; PyTorch's allocated total is checked against the
  // replay's live PyTorch blocks (TraceHealth::allocated_vs_attach_baseline).
  void apply_attach_baseline(const proto::AttachBaseline& baseline);
  // Applies `record` if it is one of the two above; ignores every other kind. What every replay calls with the
  // records that are not Events.
  void apply_attach_record(const proto::Record& record) {
    if (record.has_live_at_attach()) apply_live_at_attach(record.live_at_attach());
    else if (record.has_attach_baseline()) apply_attach_baseline(record.attach_baseline());
  }
  // Per device: what the LiveAtAttach and AttachBaseline records said (empty for a trace that did not attach).
  const std::map<int32_t, AttachFacts>& attach_facts() const { return attach_facts_; }
  // What is left now of `device`'s blocks_unknown aggregates of the allocated kind (DeviceState::counts_as_allocated):
  // bytes of its allocated total that no live allocation stands for.
  uint64_t unlisted_allocated_bytes(int32_t device) const;
  // Allocations made before attach still live at exit, by (device, layer), ascending; complete after finish().
  // Not in live_at_exit(): they have no call site.
  const std::vector<BeforeAttachLive>& before_attach_live_at_exit() const { return before_attach_at_exit_; }
  // Takes the live-at-exit snapshot if no PYTHON_FINALIZING event took it already.
  void finish();

  const std::map<int32_t, DeviceState>& devices() const { return devices_; }
  // By value: `events` is filled in here from the event count, not counted apart for every event.
  TraceHealth health() const {
    TraceHealth h = health_;
    h.events = event_index_;
    return h;
  }
  // The first 10,000 (kMaxOomsListed) OOM events, after folding; the rest are counted in health().
  const std::vector<OomEvent>& ooms() const { return ooms_; }
  // Every allocation that failed: the OOM events, listed or only counted (a driver failure under PyTorch's own
  // report of it is one), and ALLOC records with an error result. The `failed allocations` of the reports'
  // health line, and what `memtrace oom` counts.
  uint64_t failed_allocation_count() const {
    return ooms_.size() + health_.ooms_not_listed + health_.error_result_allocations;
  }
  int64_t now_ns() const { return now_ns_; }  // time of the last event (or TraceEnd)
  // Leak candidates (DeviceState::counts_as_leak) live at exit: at the first PYTHON_FINALIZING, else
  // at the end of the trace; in allocation order. Complete after finish().
  const std::vector<LiveAllocation>& live_at_exit() const { return live_at_exit_; }
  std::optional<int64_t> finalizing_time_ns() const { return finalizing_time_ns_; }
  // Time of the first successful allocation from each call site (device, stack id), freed or not.
  std::map<std::pair<int32_t, uint64_t>, int64_t> first_allocation_ns() const;
  // The same for the call sites of `allocations` only: O(allocations), not O(call sites).
  std::map<std::pair<int32_t, uint64_t>, int64_t> first_allocation_ns(
      const std::vector<LiveAllocation>& allocations) const;
  // Calls `visit` for every allocation of the allocated kind currently live on `device`.
  void for_each_allocated(int32_t device, const std::function<void(const LiveAllocation&)>& visit) const;
  // The same without a std::function call per allocation, for callers that walk often.
  template <typename Visit>
  void visit_allocated(int32_t device, Visit&& visit) const {
    auto it = devices_.find(device);
    if (it == devices_.end()) return;
    const DeviceState& state = it->second;
    live_.for_each([&](const LiveAllocation& a) {
      if (state.counts_as_allocated(a)) visit(a);
    });
  }

  // Called with every allocation of every kind and device as it becomes live (`live` true, once the model has
  // charged it) and as it stops being live (false, before the model forgets it), in the order the model applies
  // them: where an allocation lands on a live address, the one it replaces goes first. For callers that keep
  // their own figures over the live set as it changes (the HTML report's live bytes by call site): O(1) per
  // change, where walking the live set is O(live). An imported handle's size, which its allocation does not
  // say, is set later by its first mapping without a call (imported memory is never charged to a device).
  // Set it before the first apply(): with one, PyTorch block events take the general path, which calls it.
  using LiveCallback = std::function<void(const LiveAllocation& allocation, bool live)>;
  void set_live_callback(LiveCallback callback) {
    on_live_changed_ = std::move(callback);
    update_torch_fast_path_ready();
  }

  // Calls `visit` for every allocation live now, of every kind and device (the peak breakdown reads the
  // driver-layer ones outside PyTorch's segments).
  template <typename Visit>
  void visit_live(Visit&& visit) const {
    live_.for_each(visit);
  }
  // The live allocation of `space` at `address` (the handle, for kDriverHandle), or nullptr.
  const LiveAllocation* find_live(AddressSpace space, uint64_t address) const { return live_.find(space, address); }

  // The current totals of `device` (all zero for a device never seen).
  DeviceTotals totals(int32_t device) const;
  // Host memory and address space, process-wide, with their peaks.
  const ProcessTotals& process_totals() const { return process_; }
  // Free space inside `device`'s reserved memory now. Walks the device's live PyTorch blocks and
  // segments: O(live allocations), so callers take it at moments (peaks, OOMs), not after every
  // event; with set_incremental_fragmentation(true), O(log segments) (see there).
  Fragmentation fragmentation(int32_t device) const;
  // With true, the model keeps every device's segments and the largest free block in them up to date
  // as blocks and segments come and go (SegmentFreeSpace), for callers that read the fragmentation
  // after every event (timeline rows): each PyTorch block event costs O(log^2 live blocks) more and
  // takes the general path, and each VMM change (map, unmap, handle, reservation) O(log mappings) on
  // pages that do not overlap (see MappedRuns). The numbers are the walk's, but where overlapping
  // segments or pages would cost more than kFragmentationWorkPerEvent: then unknown from there on.
  // Set it before the first apply().
  void set_incremental_fragmentation(bool enabled) {
    incremental_fragmentation_ = enabled;
    update_torch_fast_path_ready();
  }
  // The index of the event from which the fragmentation is unknown because keeping it would have cost
  // too much (above), if that happened.
  std::optional<uint64_t> fragmentation_unknown_from_event() const { return fragmentation_unknown_from_event_; }
  // The same as it would be with `layers` seen on the device instead of its own (the layers a later
  // pass would be given as hints).
  Fragmentation fragmentation(int32_t device, LayerHint layers) const;
  // Whether applying `event` next would certainly raise `device`'s peak allocated (peak_allocated())
  // to above what it is now: the device's allocated total is at that peak now, and `event` is a
  // successful ALLOC of more than 0 bytes on it, of the allocated kind, at an address with no live
  // allocation. A false answer says nothing.
  bool raises_peak_allocated(const EventFields& event, int32_t device) const;
  // The devices whose state the last event applied may have changed (its own, the one of what it freed...).
  const std::vector<DeviceState*>& devices_touched() const { return touched_; }
  // Whether the last event applied raised the peak_driver or peak_blocks of some device (those that
  // peak_allocated() chooses from): false means no device's peak_allocated() is at that event.
  bool allocated_peak_raised() const { return allocated_peak_raised_; }
  // Allocations live now, of every kind and device.
  size_t live_allocations() const { return live_.size(); }
  // Index of the next event apply() takes (the number applied so far).
  uint64_t next_event_index() const { return event_index_; }
  // The latest DEVICE_USAGE sample of `device`, if any.
  std::optional<DeviceUsage> last_device_usage(int32_t device) const;
  // With false, every event takes the general path (for tests that compare it with the fast path).
  void set_fast_paths(bool enabled) {
    fast_paths_ = enabled;
    update_torch_fast_path_ready();
  }
  // Events applied by the fast path for PyTorch blocks (for tests that it is taken).
  uint64_t fast_path_events() const { return event_index_ - general_path_events_; }

  // The budget of graph memory-node replays: `slack` plus `per_event` per event read. A GRAPH_LAUNCH
  // replays every memory node of its graph: a few bytes of input, O(nodes) work, so launches x nodes could
  // make the work quadratic in the file. A launch that would take the replays so far past the budget is
  // counted (TraceHealth::graph_launches_not_replayed) and not replayed. One replay does what applying one
  // ALLOC or FREE does, less the decoding, so the replays cost at most 64 passes' worth plus a constant. A CUDA-graphs
  // job (torch.compile mode="reduce-overhead": tens to hundreds of memory nodes launched thousands of times) stays well
  // within the defaults: a graph of 64 nodes or fewer is never limited, and 16 M replays allow a 300-node graph 50,000
  // launches even were the launches all the trace held.
  static constexpr uint64_t kGraphReplaySlack = 1 << 24;
  static constexpr uint64_t kGraphReplaysPerEvent = 64;
  // Other figures, for tests of the budget (set before the first apply()).
  void set_graph_replay_budget(uint64_t slack, uint64_t per_event) {
    graph_replay_slack_ = slack;
    graph_replays_per_event_ = per_event;
  }
  // What the devices' call-site arrays may still grow by, together (for tests of that budget).
  uint64_t site_array_entries_left() const { return site_array_entries_left_; }

 private:
  // A VMM physical allocation (cuMemCreate / an imported handle): how many mappings back it, and
  // whether cuMemRelease has been called (its memory stays until the last unmap).
  struct HandleState {
    uint32_t mappings = 0;
    bool released = false;
  };
  struct Mapping {
    uint64_t handle = 0;
    uint64_t size_bytes = 0;
    bool held_blocks = false;  // a PyTorch block has been placed in it (an expandable segment's page)
  };
  // A memory node of a graph, replayed at each launch of an executable graph made from it.
  struct GraphNode {
    bool alloc = false;
    int32_t device = -1;
    uint64_t address = 0;
    uint64_t size_bytes = 0;
    uint64_t stack_id = 0;
  };

  void on_alloc(const EventFields& event, AddressSpace space);
  void on_free(const EventFields& event, AddressSpace space);
  void add_live(const LiveAllocation& a);
  // Ends a live allocation (as found in live_): uncharges it and forgets it (and remembers it as freed).
  void release(const LiveAllocation& a);
  void on_map(const EventFields& event);
  void on_unmap(const EventFields& event);
  void on_address_reserve(const EventFields& event, int64_t sign);
  void on_pool_sample(const EventFields& event);
  void on_device_usage(const EventFields& event);
  void on_graph_node(const EventFields& event);
  void on_graph_launch(const EventFields& event);
  void on_context_destroy(const EventFields& event);
  // Marks the segment a PyTorch block at `address` lies in. Inline for the common case, a block in
  // the same segment as the last one, which has nothing to do.
  void mark_segment_of_block(uint64_t address) {
    if (!in_last_segment(address)) find_segment_of_block(address);
  }
  bool in_last_segment(uint64_t address) const { return address - last_segment_start_ < last_segment_bytes_; }
  void find_segment_of_block(uint64_t address);
  // The bytes of `device`'s driver allocations that hold a live PyTorch block (marking them as its segments): its
  // reserved memory at attach where the AttachBaseline has no PyTorch totals (a dormant tracer's).
  uint64_t torch_segment_bytes_at_attach(int32_t device);
  // Marks `segment` (a live driver allocation) as one of PyTorch's segments (held_blocks), with its free space
  // tracked where fragmentation is kept incrementally.
  void mark_torch_segment(LiveAllocation& segment);
  void update_process_peaks();
  void charge(const LiveAllocation& a, int64_t sign);
  // Called after the event's blocks are applied.
  void note_torch_totals(const EventFields& event, int32_t device) {
    DeviceState& state = device_state(device);
    state.allocator_layer_seen = true;
    state.block_layer_seen = true;
    state.torch_totals_reported = true;
    state.torch_reserved_bytes = event.allocator_reserved_bytes();
    if (torch_totals_disagree(event, state)) check_torch_totals(event, state, event_index_);
  }
  // Whether the state's PyTorch blocks, after a TORCH_ALLOCATOR event, contradict PyTorch's totals
  // (TraceHealth::allocated_vs_pytorch, allocated_above_reserved).
  static bool torch_totals_disagree(const EventFields& event, const DeviceState& state) {
    return (event.has_allocator_allocated_bytes() && event.allocator_allocated_bytes() != state.torch_block_bytes) ||
           state.torch_block_bytes > state.torch_reserved_bytes;
  }
  // Counts what torch_totals_disagree found, at the event of index `event_index`.
  [[gnu::noinline]] void check_torch_totals(const EventFields& event, const DeviceState& state, uint64_t event_index);
  void note_mismatch(FigureMismatch& m, const DeviceState& state, uint64_t event_index, uint64_t replay_bytes,
                     uint64_t trace_bytes);
  void update_peaks_and_notify(DeviceState& state);
  void update_peaks(DeviceState& state);
  // Calls on_totals_changed_ (set) if `state`'s totals differ from `last`, its entry in last_totals_.
  void notify_if_changed(const DeviceState& state, std::optional<DeviceTotals>& last, int64_t time_ns);
  // The last step of applying an attach record: the peaks (at_attach), and the totals callback held.
  void end_attach_record();
  void notify_held_attach_totals();
  bool applying_attach_record_ = false;
  std::vector<int32_t> attach_totals_held_;  // devices whose totals the attach records changed, not yet notified
  int64_t attach_totals_time_ns_ = 0;        // the time of the last attach record
  // Inlined into apply(): the dominant event; apply_general is the rest.
  [[gnu::always_inline]] bool apply_torch_block(const EventFields& event);
  // apply_torch_block's steps that make calls: rare, but for the totals callback.
  [[gnu::noinline]] void finish_torch_block(const EventFields& event);
  [[gnu::noinline]] void apply_general(const EventFields& event);
  // The last step of applying an event, on either path.
  void end_event() { ++event_index_; }
  void snapshot_live_at_exit();
  void keep_only_leak_candidates();
  // Where a free of an address the replay does not know, of `space` on `device`, is taken from that space's
  // blocks_unknown aggregate: true (having uncharged up to `size_bytes` of it) where the aggregate has bytes left.
  bool take_from_unlisted(AddressSpace space, int32_t device, uint64_t size_bytes);
  // The blocks_unknown aggregates: (device, space) -> bytes left, charged to the device as its space's memory.
  std::map<std::pair<int32_t, AddressSpace>, uint64_t> unlisted_before_attach_;
  std::map<int32_t, AttachFacts> attach_facts_;
  std::vector<BeforeAttachLive> before_attach_at_exit_;
  BeforeAttachLive& before_attach_entry(int32_t device, proto::Layer layer);
  // The state of `device` (made on first use), marked as touched by the current event.
  DeviceState& device_state(int32_t device) {
    return cached_state_ && cached_device_ == device ? touch(*cached_state_) : find_device_state(device);
  }
  DeviceState& find_device_state(int32_t device);
  DeviceState& touch(DeviceState& state) {
    if (touched_.empty() ||
        (touched_.back() != &state && std::find(touched_.begin(), touched_.end(), &state) == touched_.end()))
      touched_.push_back(&state);
    return state;
  }

  std::map<int32_t, LayerHint> hints_;
  std::map<int32_t, DeviceState> devices_;
  // Per device: the totals last passed to on_totals_changed_ (or compared, without a callback).
  std::map<int32_t, std::optional<DeviceTotals>> last_totals_;
  // The device of the last device_state() call and its entries in devices_, last_totals_ and
  // first_allocation_ns_ (map nodes do not move): nearly every event is on the same device as the one
  // before.
  int32_t cached_device_ = 0;
  DeviceState* cached_state_ = nullptr;
  std::optional<DeviceTotals>* cached_last_totals_ = nullptr;
  SiteFirstTimes* cached_first_times_ = nullptr;
  // Freed and not allocated again: tells a double free from a free of an unknown address. Bounded so
  // that a trace with endlessly new addresses cannot grow it without limit.
  static constexpr size_t kMaxFreedRemembered = 1 << 20;
  LiveTable live_{kMaxFreedRemembered};
  // Indexes of part of live_, for rebuilding segments: PyTorch blocks and driver-layer device pointer
  // allocations (address -> size). The second is kept only from the first PyTorch block on (built then
  // from live_), so that traces without PyTorch do not pay for it.
  mutable BlockIndex torch_blocks_;  // brought up to date by fragmentation(), a const query
  // With incremental_fragmentation_: the same blocks and the segments, kept up to date at every
  // change; the expandable segments by mapped_runs_ from the pages of device memory mapped now
  // (mappings_ whose handle is live), but where those overlap (a damaged trace): then they are rebuilt
  // from every mapping by the next fragmentation() read after a VMM change (mapped_segments_stale_).
  bool incremental_fragmentation_ = false;
  mutable SegmentFreeSpace free_space_;
  mutable bool mapped_segments_stale_ = false;
  static constexpr uint8_t kDriverSegment = 0, kMappedSegment = 1;  // SegmentFreeSpace::Key kinds
  mutable MappedRuns mapped_runs_{kMappedSegment};
  // Handle -> the addresses mapped to it: the pages that count or stop counting when it comes or goes.
  std::unordered_map<uint64_t, std::set<uint64_t>> mappings_of_handle_;
  void track_mapping(uint64_t address);                     // mappings_[address] is new or may count anew
  void untrack_mapping(uint64_t address, uint64_t handle);  // before mappings_[address] goes
  void retrack_handle(uint64_t handle, bool live);
  void change_reservation(const EventFields& event, int64_t sign);
  // Keeping the fragmentation costs O(log n) an event but where segments or pages overlap (a damaged
  // trace): there a block event looks at every segment that starts before it, and a VMM change
  // rebuilds the expandable segments from every mapping. Past kFragmentationWorkPerEvent steps an
  // event on average (after the first kFragmentationWorkSlack), the model stops keeping it and
  // fragmentation() says the segments are not known from then on: a timeline stays O(n log n).
  static constexpr uint64_t kFragmentationWorkPerEvent = 64, kFragmentationWorkSlack = 1 << 20;
  mutable uint64_t mapped_refresh_work_ = 0;  // mappings looked at by refresh_mapped_segments
  bool fragmentation_given_up_ = false;
  std::optional<uint64_t> fragmentation_unknown_from_event_;
  void check_fragmentation_work();
  void refresh_mapped_segments() const;
  // The expandable segments of every device (runs of mappings of its device memory handles that held
  // a block, split by reservation), for `visit(AddressRange, device)`.
  template <typename Visit>
  void for_each_mapped_segment(Visit&& visit) const;
  Fragmentation incremental_fragmentation(int32_t device, Fragmentation f, uint64_t torch_block_bytes) const;
  std::map<uint64_t, uint64_t> driver_pointers_;
  bool segment_index_active_ = false;
  void activate_segment_index();
  // [start, start + bytes): addresses for which the lookup in driver_pointers_ finds the allocation the
  // last PyTorch block was found in, already marked held_blocks (blocks come in runs inside one
  // segment). Emptied whenever driver_pointers_ changes.
  uint64_t last_segment_start_ = 0;
  uint64_t last_segment_bytes_ = 0;
  std::unordered_map<uint64_t, HandleState> handles_;
  std::map<uint64_t, Mapping> mappings_;         // virtual address -> what backs it
  std::map<uint64_t, uint64_t> reservations_;    // cuMemAddressReserve: start -> size
  std::set<uint64_t> reservations_with_blocks_;  // starts of reservations a PyTorch block was placed in
  void release_torch_segment(int32_t device, uint64_t bytes);
  uint64_t reservation_of(uint64_t address) const;                 // start of the reservation holding `address`, or 0
  std::map<std::pair<int32_t, uint64_t>, uint64_t> pool_samples_;  // (device, pool) -> latest sample
  std::unordered_map<uint64_t, std::vector<GraphNode>> graph_nodes_;    // CUgraph -> its memory nodes
  std::unordered_map<uint64_t, std::vector<GraphNode>> capture_nodes_;  // capture id -> nodes so far
  std::unordered_map<uint64_t, uint64_t> exec_graphs_;                  // CUgraphExec -> CUgraph
  // Memory nodes kept, of graphs and of captures under way: at most kMaxGraphNodes (40 bytes each), beyond
  // which nodes are counted and dropped. Executable graphs: at most kMaxGraphExecs, beyond which new
  // instantiations are counted and not kept (their launches count as unknown ones).
  uint64_t graph_nodes_kept_ = 0;
  static constexpr uint64_t kMaxGraphNodes = 1 << 20;
  static constexpr size_t kMaxGraphExecs = 1 << 20;
  // The budget of node replays (set_graph_replay_budget) and the replays so far.
  uint64_t graph_replay_slack_ = kGraphReplaySlack;
  uint64_t graph_replays_per_event_ = kGraphReplaysPerEvent;
  uint64_t graph_node_replays_ = 0;
  ProcessTotals process_;
  bool process_touched_ = false;       // the current event may have changed process_
  std::vector<DeviceState*> touched_;  // devices whose totals the current event may have changed
  TraceHealth health_;
  std::vector<OomEvent> ooms_;
  static constexpr size_t kMaxOomsListed = 10000;
  // Per thread: how many of the last entries of ooms_ are driver-level failures not yet followed by
  // any other event of that thread (candidates to fold into an allocator-level OOM).
  std::unordered_map<uint32_t, uint32_t> pending_driver_ooms_;
  void on_oom(const EventFields& event);
  std::vector<LiveAllocation> live_at_exit_;
  bool exit_snapshot_taken_ = false;
  std::optional<int64_t> finalizing_time_ns_;
  std::map<int32_t, SiteFirstTimes> first_allocation_ns_;  // by device
  // Entries the devices' call-site arrays may still grow by, together (SiteFirstTimes::note): each array
  // may reach 1 M ids (16 MiB), and 1,024 devices of them would be 16 GiB; past this budget (32 MiB in
  // all) new ids go to the hash tables, whose size follows the input.
  uint64_t site_array_entries_left_ = 2 * SiteFirstTimes::kMaxDenseStackId;
  SiteFirstTimes& site_first_times(int32_t device) {
    return cached_state_ && cached_device_ == device ? *cached_first_times_ : first_allocation_ns_[device];
  }
  int64_t now_ns_ = 0;
  uint64_t event_index_ = 0;
  TotalsCallback on_totals_changed_;
  LiveCallback on_live_changed_;
  bool fast_paths_ = true;
  // The model's own conditions of apply_torch_block, all of which (and cached_device_) only
  // apply_general and set_fast_paths change, kept up to date after each: cached_device_ where they
  // hold, else kNoTorchFastPathDevice, which no Event.device (an int32) is. The fast path tests the
  // conditions and the event's device in one comparison. touched_ must be {cached_state_}, and the
  // device's two layers seen, as the fast path leaves them (the general path would make them that for
  // the event): then it need not touch them.
  static constexpr int64_t kNoTorchFastPathDevice = INT64_MIN;
  int64_t torch_fast_path_device_ = kNoTorchFastPathDevice;
  void update_torch_fast_path_ready() {
    bool ready = fast_paths_ && !incremental_fragmentation_ && !on_live_changed_ && attach_totals_held_.empty() &&
                 cached_state_ && segment_index_active_ && pending_driver_ooms_.empty() && touched_.size() == 1 &&
                 touched_[0] == cached_state_ && cached_state_->block_layer_seen && cached_state_->allocator_layer_seen;
    torch_fast_path_device_ = ready ? int64_t(cached_device_) : kNoTorchFastPathDevice;
  }
  bool allocated_peak_raised_ = false;
  // Events applied by apply_general: counted there, not on the fast path (fast_path_events()).
  uint64_t general_path_events_ = 0;
};

}  // namespace memtrace
