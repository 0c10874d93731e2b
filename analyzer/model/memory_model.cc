#include "model/memory_model.h"

#include <algorithm>
#include <cstdint>

#include "model/segment_map.h"

namespace memtrace {
namespace {

// Where an ALLOC's memory lives. The tracer says so in Event.memory; a trace that leaves it at the
// default (MEMORY_DEVICE, e.g. one written before the field existed) gets what the API implies.
proto::Memory memory_of(const EventFields& e) {
  if (e.memory() != proto::MEMORY_DEVICE) return e.memory();
  switch (e.api()) {
    case proto::CUDA_MALLOC_MANAGED:
    case proto::CU_MEM_ALLOC_MANAGED: return proto::MEMORY_MANAGED;
    case proto::CUDA_MALLOC_HOST:
    case proto::CUDA_HOST_ALLOC:
    case proto::CU_MEM_ALLOC_HOST:
    case proto::CU_MEM_HOST_ALLOC: return proto::MEMORY_HOST_PINNED;
    case proto::CUDA_HOST_REGISTER:
    case proto::CU_MEM_HOST_REGISTER: return proto::MEMORY_HOST_REGISTERED;
    case proto::CUDA_MALLOC_ARRAY:
    case proto::CUDA_MALLOC_3D_ARRAY:
    case proto::CUDA_MALLOC_MIPMAPPED_ARRAY:
    case proto::CU_ARRAY_CREATE:
    case proto::CU_ARRAY_3D_CREATE:
    case proto::CU_MIPMAPPED_ARRAY_CREATE: return proto::MEMORY_ARRAY;
    case proto::CUDA_IPC_OPEN_MEM_HANDLE:
    case proto::CU_IPC_OPEN_MEM_HANDLE:
    case proto::CU_EXTERNAL_MEMORY_GET_MAPPED_BUFFER:
    case proto::CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE: return proto::MEMORY_IMPORTED;
    default: return proto::MEMORY_DEVICE;
  }
}

// cuMemCreate returns a handle, not a pointer, and so does cuMemImportFromShareableHandle; MAP, UNMAP
// and cuMemRelease refer to both the same way.
bool is_handle_api(proto::Api api) {
  return api == proto::CU_MEM_CREATE || api == proto::CU_MEM_RELEASE ||
         api == proto::CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE;
}

// Allocations the driver frees with their context (cuCtxDestroy, cudaDeviceReset): everything made by
// the allocation calls of a context, and pool blocks (the pools go with it). Not VMM handles, not
// address reservations, not imports, and not registrations of host memory the process owns.
bool freed_with_context(const LiveAllocation& a) {
  if (a.space == AddressSpace::kPoolBlock) return true;
  if (a.space != AddressSpace::kDriverPointer) return false;
  return a.memory == proto::MEMORY_DEVICE || a.memory == proto::MEMORY_ARRAY || a.memory == proto::MEMORY_MANAGED ||
         a.memory == proto::MEMORY_HOST_PINNED;
}

// Whether the peak rose.
bool raise(Peak& peak, uint64_t bytes, int64_t now_ns, uint64_t event_index, bool at_attach = false) {
  if (bytes <= peak.bytes) return false;
  peak = Peak{bytes, now_ns, event_index, at_attach};
  return true;
}

bool is_stream_ordered_api(proto::Api api) {
  switch (api) {
    case proto::CUDA_MALLOC_ASYNC:
    case proto::CUDA_FREE_ASYNC:
    case proto::CUDA_MALLOC_FROM_POOL_ASYNC:
    case proto::CU_MEM_ALLOC_ASYNC:
    case proto::CU_MEM_FREE_ASYNC:
    case proto::CU_MEM_ALLOC_FROM_POOL_ASYNC: return true;
    default: return false;
  }
}

// The table an ALLOC/FREE event belongs to. The layer decides driver versus block; when a writer left
// the layer unset the API decides.
AddressSpace space_of(const EventFields& e) {
  bool block =
      e.layer() == proto::LAYER_BLOCK ||
      (e.layer() == proto::LAYER_UNKNOWN && (e.api() == proto::TORCH_ALLOCATOR || is_stream_ordered_api(e.api())));
  if (block) return e.api() == proto::TORCH_ALLOCATOR ? AddressSpace::kTorchBlock : AddressSpace::kPoolBlock;
  if (is_handle_api(e.api())) return AddressSpace::kDriverHandle;
  return AddressSpace::kDriverPointer;
}

// Whether Event.result, memory, graph and capture_id are all 0 (MEMORY_DEVICE is 0), tested on their
// whole 64-bit slots with one OR of the four (about 5 instructions fewer than a test per accessor): a
// slot that is not 0 but whose accessor narrows to 0, or a FREE's memory (which the general path does
// not read), gives false, which only sends the event to the general path.
bool result_memory_graph_and_capture_all_0(const EventFields& e) {
  static_assert(proto::MEMORY_DEVICE == 0);
  const uint64_t* v = e.values;
  return (v[EventFields::kResult] | v[EventFields::kMemory] | v[EventFields::kGraph] | v[EventFields::kCaptureId]) == 0;
}

// Whether an event's size or an allocator total is kMaxPlausibleBytes (2^50) or more: one test of the
// three values' high bits together.
bool implausible_size(const EventFields& e) {
  static_assert(kMaxPlausibleBytes == uint64_t{1} << 50);
  return ((e.size() | e.allocator_allocated_bytes() | e.allocator_reserved_bytes()) >> 50) != 0;
}

}  // namespace

bool DeviceState::counts_as_leak(const LiveAllocation& a) const {
  if (!a.charged_to_device() || a.device != device) return false;
  return allocator_layer_seen ? is_block_space(a.space) : true;
}

DeviceState& MemoryModel::find_device_state(int32_t device) {
  auto [it, inserted] = devices_.try_emplace(device);
  if (inserted) {
    it->second.device = device;
    if (auto hint = hints_.find(device); hint != hints_.end()) {
      it->second.block_layer_seen = hint->second.block_layer;
      it->second.allocator_layer_seen = hint->second.allocator_layer;
    }
  }
  cached_device_ = device;
  cached_state_ = &it->second;
  cached_last_totals_ = &last_totals_[device];
  cached_first_times_ = &first_allocation_ns_[device];
  return touch(it->second);
}

void MemoryModel::on_oom(const EventFields& event) {
  OomEvent oom{event.size(),
               event.device(),
               event.device_free_bytes(),
               event.device_total_bytes(),
               event.stack_id(),
               now_ns_,
               event.api(),
               event.layer(),
               event.result(),
               0,
               event.tid()};
  uint32_t& pending = pending_driver_ooms_[event.tid()];
  if (event.api() == proto::TORCH_ALLOCATOR) {
    note_torch_totals(event, event.device());
    // The thread's driver failures since its last other event belong to this one failed allocation.
    // They are the last entries of ooms_ from this thread, but other threads may have appended since.
    for (size_t i = ooms_.size(); i-- > 0 && pending > 0;) {
      if (ooms_[i].tid != event.tid() || ooms_[i].layer != proto::LAYER_DRIVER) continue;
      ooms_.erase(ooms_.begin() + static_cast<std::ptrdiff_t>(i));
      --pending;
      ++oom.driver_attempts;
    }
    pending = 0;
  }
  // A job that keeps retrying after OOMs must not make the analyzer's memory grow with its events.
  if (ooms_.size() >= kMaxOomsListed) {
    ++health_.ooms_not_listed;
    return;
  }
  if (event.api() != proto::TORCH_ALLOCATOR) ++pending;
  ooms_.push_back(oom);
}

// The dominant event of a PyTorch trace, a caching-allocator block ALLOC or FREE on the device of the
// event before, applied in one go. It gives the same state as the general path (apply_general: space_of
// is kTorchBlock, on_alloc / on_free, add_live / release, charge, note_torch_totals,
// update_peaks_and_notify) because it runs only where that path would take these branches:
// - a successful event (result 0) at a non-zero address, not a graph's memory node, with no driver OOM
//   of any thread pending (the general path would forget the thread's), Event.memory MEMORY_DEVICE
//   (memory_of() gives it back unchanged for TORCH_ALLOCATOR; charge() then adds to the blocks), on the
//   cached device, the segment index already active (the first block of a trace activates it),
//   devices_touched() already {that device}, as the general path would leave it, and the device's
//   block and allocator layers already seen, as the event would make them: the conditions on the
//   model's state and the cached device are torch_fast_path_device_;
// - no size or allocator total of kMaxPlausibleBytes or more (the general path counts those);
// - ALLOC: no allocation live at the address (LiveTable::emplace changes nothing when there is one, and
//   the event goes to the general path, which drops the old allocation first);
// - FREE: a live block at the address, of device memory of this same device, not one live at attach.
// Only this device is touched then, and of its quantities only torch_block_bytes and
// torch_reserved_bytes change: every other peak is already at least its quantity (each event raises the
// peaks of every device it touches), so only those two peaks can rise, and a FREE's blocks only fall.
// It makes one call at most, its last step (a tail call): what calls is either left to the general path,
// tested before anything changes (the growth of the live table or of the call-site array, a free the
// live table forgets: all rare), or done by finish_torch_block after everything else (the lookup of a
// block's segment outside the last one, which a device whose blocks lie in no driver allocation needs
// for every block; the totals callback; a check of PyTorch's totals that fails), which changes nothing
// the other steps read. With calls in its
// body, apply() saved and restored six registers for every event (callgrind); without, four.
// Returns false, having changed nothing, where the general path has to apply the event.
inline bool MemoryModel::apply_torch_block(const EventFields& event) {
  bool alloc = event.kind() == proto::ALLOC;
  if (!(alloc || event.kind() == proto::FREE) || event.layer() != proto::LAYER_BLOCK ||
      event.api() != proto::TORCH_ALLOCATOR || !result_memory_graph_and_capture_all_0(event) || event.address() == 0 ||
      int64_t(event.device()) != torch_fast_path_device_ || implausible_size(event))
    return false;
  DeviceState& state = *cached_state_;
  if (alloc) {
    if (!live_.can_emplace_without_growing() || !cached_first_times_->in_array(event.stack_id())) return false;
    auto [a, inserted] = live_.emplace_without_growing(AddressSpace::kTorchBlock, event.address());
    if (!inserted) return false;  // a duplicate: nothing changed
    *a = LiveAllocation{.space = AddressSpace::kTorchBlock,
                        .memory = proto::MEMORY_DEVICE,
                        .device = cached_device_,
                        .size_bytes = event.size(),
                        .stack_id = event.stack_id(),
                        .time_ns = now_ns_,
                        .event_index = event_index_,
                        .address = event.address(),
                        .context = event.context()};
    cached_first_times_->note_in_array(event.stack_id(), now_ns_);
    state.torch_block_bytes = saturating_add(state.torch_block_bytes, event.size());
    ++state.block_allocations;
    torch_blocks_.add(event.address(), event.size());
  } else {
    if (!live_.remembers_next_free()) return false;
    LiveTable::Found it = live_.find_entry(AddressSpace::kTorchBlock, event.address());
    // A block live at attach: its free is counted apart (release()).
    if (!it || it->device != cached_device_ || it->memory != proto::MEMORY_DEVICE || it->before_attach) return false;
    state.torch_block_bytes -= std::min(state.torch_block_bytes, it->size_bytes);
    ++state.block_frees;
    torch_blocks_.remove(it->address);
    live_.erase_remembered(it);
  }
  state.torch_reserved_bytes = event.allocator_reserved_bytes();
  if (alloc) allocated_peak_raised_ = raise(state.peak_blocks, state.blocks_bytes(), now_ns_, event_index_);
  raise(state.peak_torch_reserved, state.torch_reserved_bytes, now_ns_, event_index_);
  end_event();
  if ((alloc && !in_last_segment(event.address())) || on_totals_changed_ || torch_totals_disagree(event, state))
    finish_torch_block(event);  // a tail call
  return true;
}

void MemoryModel::finish_torch_block(const EventFields& event) {
  // The kind read again, not passed: one register fewer kept through the fast path.
  if (event.kind() == proto::ALLOC) mark_segment_of_block(event.address());
  // The event's index: end_event() has counted it.
  if (torch_totals_disagree(event, *cached_state_)) check_torch_totals(event, *cached_state_, event_index_ - 1);
  // Before the callback, as on the general path: a callback may ask for the fragmentation, which reads
  // the segments' marks. That end_event() came first changes nothing a callback is given or reads
  // (timeline's reads the totals, the time and the fragmentation).
  if (on_totals_changed_) notify_if_changed(*cached_state_, *cached_last_totals_, now_ns_);
}

void MemoryModel::check_torch_totals(const EventFields& event, const DeviceState& state, uint64_t event_index) {
  if (event.has_allocator_allocated_bytes() && event.allocator_allocated_bytes() != state.torch_block_bytes)
    note_mismatch(health_.allocated_vs_pytorch, state, event_index, state.torch_block_bytes,
                  event.allocator_allocated_bytes());
  if (state.torch_block_bytes > state.torch_reserved_bytes)
    note_mismatch(health_.allocated_above_reserved, state, event_index, state.torch_block_bytes,
                  state.torch_reserved_bytes);
}

void MemoryModel::note_mismatch(FigureMismatch& m, const DeviceState& state, uint64_t event_index,
                                uint64_t replay_bytes, uint64_t trace_bytes) {
  if (m.events++ == 0) m = FigureMismatch{1, event_index, now_ns_, state.device, replay_bytes, trace_bytes};
}

void MemoryModel::apply(const EventFields& event) {
  // One test for both checks in the common case, a delta from 0 to 100 years (a negative one is a huge
  // unsigned one).
  if (uint64_t(event.time_delta_ns()) > uint64_t(kMaxPlausibleDeltaNs)) [[unlikely]] {
    if (event.time_delta_ns() < 0) ++health_.backward_timestamps;
    if (!plausible_delta_ns(event.time_delta_ns())) ++health_.implausible_time_deltas;
  }
  now_ns_ = saturating_add(now_ns_, event.time_delta_ns());
  allocated_peak_raised_ = false;
  if (apply_torch_block(event)) return;
  apply_general(event);  // a tail call: apply() saves no more registers than the fast path needs
}

void MemoryModel::apply_general(const EventFields& event) {
  ++general_path_events_;
  notify_attach_totals();  // where the caller did not before this event
  if (incremental_fragmentation_) check_fragmentation_work();
  touched_.clear();
  if (!valid_device_ordinal(event.device())) {
    // No state is made for it (valid_device_ordinal): the event is counted, and its time kept.
    ++health_.events_with_bad_device;
    update_torch_fast_path_ready();
    end_event();
    return;
  }
  if (implausible_size(event)) ++health_.implausible_sizes;
  // A sample is not the thread going on: the hook records a DEVICE_USAGE right after each failure, so one
  // comes between PyTorch's failed segment request and its own OOM report.
  bool sample = event.kind() == proto::DEVICE_USAGE || event.kind() == proto::POOL_RESERVED;
  if (event.kind() != proto::OOM && !sample && !pending_driver_ooms_.empty()) pending_driver_ooms_.erase(event.tid());
  bool graph_node = event.graph() != 0 || event.capture_id() != 0;
  switch (event.kind()) {
    case proto::ALLOC:
      if (graph_node) on_graph_node(event);
      else on_alloc(event, space_of(event));
      break;
    case proto::FREE:
      if (graph_node) on_graph_node(event);
      else on_free(event, space_of(event));
      break;
    case proto::OOM: on_oom(event); break;
    case proto::MAP: on_map(event); break;
    case proto::UNMAP: on_unmap(event); break;
    case proto::ADDRESS_RESERVE: on_address_reserve(event, +1); break;
    case proto::ADDRESS_FREE: on_address_reserve(event, -1); break;
    case proto::POOL_RESERVED: on_pool_sample(event); break;
    case proto::DEVICE_USAGE: on_device_usage(event); break;
    case proto::GRAPH_CAPTURED:
    case proto::GRAPH_INSTANTIATE:
    case proto::GRAPH_LAUNCH: on_graph_launch(event); break;
    case proto::CONTEXT_DESTROY: on_context_destroy(event); break;
    case proto::PYTHON_FINALIZING:
      if (!finalizing_time_ns_) {
        finalizing_time_ns_ = now_ns_;
        snapshot_live_at_exit();
      }
      break;
    default: break;
  }
  for (DeviceState* state : touched_) update_peaks_and_notify(*state);
  if (process_touched_) {
    update_process_peaks();
    process_touched_ = false;
  }
  update_torch_fast_path_ready();
  end_event();
}

void MemoryModel::apply_end(const proto::TraceEnd& end) {
  notify_attach_totals();
  if (end.time_delta_ns() < 0) ++health_.backward_timestamps;
  if (!plausible_delta_ns(end.time_delta_ns())) ++health_.implausible_time_deltas;
  now_ns_ = saturating_add(now_ns_, end.time_delta_ns());
}

// The event an ALLOC of `live`'s layer, api and memory would be: the rules that place an ALLOC (space_of,
// memory_of) place it.
EventFields alloc_event_of(const proto::LiveAtAttach& live) {
  EventFields e;
  e.set(EventFields::kKind, proto::ALLOC);
  e.set(EventFields::kLayer, uint64_t(int64_t(live.layer())));
  e.set(EventFields::kApi, uint64_t(int64_t(live.api())));
  e.set(EventFields::kDevice, uint64_t(int64_t(live.device())));
  e.set(EventFields::kStream, live.stream());
  e.set(EventFields::kAddress, live.address());
  e.set(EventFields::kSize, live.size());
  e.set(EventFields::kMemory, uint64_t(int64_t(live.memory())));
  return e;
}

AttachFacts sum_attach_facts(const std::map<int32_t, AttachFacts>& facts) {
  AttachFacts all;
  for (const auto& [device, f] : facts) {
    all.block_allocations = saturating_add(all.block_allocations, f.block_allocations);
    all.block_bytes = saturating_add(all.block_bytes, f.block_bytes);
    all.driver_allocations = saturating_add(all.driver_allocations, f.driver_allocations);
    all.driver_bytes = saturating_add(all.driver_bytes, f.driver_bytes);
    all.block_frees = saturating_add(all.block_frees, f.block_frees);
    all.driver_frees = saturating_add(all.driver_frees, f.driver_frees);
    all.unlisted_bytes = saturating_add(all.unlisted_bytes, f.unlisted_bytes);
  }
  return all;
}

uint64_t MemoryModel::unlisted_allocated_bytes(int32_t device) const {
  auto state = devices_.find(device);
  if (state == devices_.end()) return 0;
  uint64_t bytes = 0;
  for (const auto& [key, left] : unlisted_before_attach_)
    if (key.first == device && (!state->second.block_layer_seen || is_block_space(key.second)))
      bytes = saturating_add(bytes, left);
  return bytes;
}

void MemoryModel::apply_live_at_attach(const proto::LiveAtAttach& live) {
  if (!valid_device_ordinal(live.device())) {
    ++health_.attach_records_with_bad_device;
    return;
  }
  if (event_index_ > 0) ++health_.live_at_attach_after_events;
  allocated_peak_raised_ = false;
  if (live.size() >= kMaxPlausibleBytes) ++health_.implausible_sizes;
  touched_.clear();
  EventFields event = alloc_event_of(live);
  AttachFacts& facts = attach_facts_[live.device()];
  if (live.address() == 0 && live.blocks_unknown()) {
    // An aggregate: charged as one allocation of its space would be, kept apart from the live table.
    AddressSpace space = space_of(event);
    uint64_t& left = unlisted_before_attach_[{live.device(), space}];
    left = saturating_add(left, live.size());
    facts.unlisted_bytes = saturating_add(facts.unlisted_bytes, live.size());
    charge(LiveAllocation{.space = space,
                          .memory = memory_of(event),
                          .before_attach = true,
                          .device = live.device(),
                          .size_bytes = live.size()},
           +1);
  } else {
    LiveAllocation a{.space = space_of(event),
                     .memory = memory_of(event),
                     .before_attach = true,
                     .device = live.device(),
                     .size_bytes = live.size(),
                     .stack_id = 0,
                     .time_ns = now_ns_,
                     .event_index = event_index_,
                     .address = live.address()};
    if (live.api() == proto::CU_MEM_ADDRESS_RESERVE) {
      change_reservation(event, +1);  // address space, not memory: a later ADDRESS_FREE frees it
    } else {
      add_live(a);
      // A segment PyTorch's snapshot listed: PyTorch's reserved memory, even if no block of it is seen.
      if (live.torch_segment() && a.space == AddressSpace::kDriverPointer && a.memory == proto::MEMORY_DEVICE)
        if (LiveAllocation* segment = live_.find(a.space, a.address)) mark_torch_segment(*segment);
      if (a.charged_to_device()) {  // the device's memory: not host memory, managed memory or imports
        bool block = is_block_space(a.space);
        ++(block ? facts.block_allocations : facts.driver_allocations);
        uint64_t& bytes = block ? facts.block_bytes : facts.driver_bytes;
        bytes = saturating_add(bytes, live.size());
      }
    }
  }
  end_attach_record();
}

void MemoryModel::apply_attach_baseline(const proto::AttachBaseline& baseline) {
  if (!valid_device_ordinal(baseline.device())) {
    ++health_.attach_records_with_bad_device;
    return;
  }
  allocated_peak_raised_ = false;
  touched_.clear();
  attach_facts_[baseline.device()].baseline = baseline;
  DeviceState& state = device_state(baseline.device());
  if (baseline.has_allocator_reserved_bytes() && !state.torch_totals_reported) {
    if (state.pool_block_bytes != 0 && state.torch_block_bytes == 0) {
      // The cudaMallocAsync backend: its blocks are stream-ordered pool blocks and it never reports to the c10
      // hook, so reserved is the pools' (as in a trace from launch); what PyTorch said at attach is their reserved
      // memory until the first POOL_RESERVED sample.
      state.pool_reserved_sampled_bytes =
          saturating_add(saturating_sub(state.pool_reserved_sampled_bytes, state.attach_pool_reserved_bytes),
                         baseline.allocator_reserved_bytes());
      state.attach_pool_reserved_bytes = baseline.allocator_reserved_bytes();
    } else {
      // torch.cuda.memory_reserved() at attach: the reserved total until PyTorch's first report after it.
      state.allocator_layer_seen = true;
      state.torch_reserved_bytes = baseline.allocator_reserved_bytes();
    }
  } else if (!state.torch_totals_reported && state.torch_block_bytes != 0) {
    // A dormant tracer's baseline has no PyTorch totals: PyTorch's reserved memory at attach is its segments, the
    // driver allocations its live blocks lie in, until its first report after attach.
    state.allocator_layer_seen = true;
    state.torch_reserved_bytes = torch_segment_bytes_at_attach(baseline.device());
  }
  if (baseline.has_allocator_allocated_bytes() && baseline.allocator_allocated_bytes() != state.torch_block_bytes)
    note_mismatch(health_.allocated_vs_attach_baseline, state, event_index_, state.torch_block_bytes,
                  baseline.allocator_allocated_bytes());
  end_attach_record();
}

uint64_t MemoryModel::torch_segment_bytes_at_attach(int32_t device) {
  // The records list blocks and segments in any order: a block listed before its segment left it unmarked.
  if (!segment_index_active_) activate_segment_index();
  std::vector<uint64_t> blocks;
  live_.for_each([&](const LiveAllocation& a) {
    if (a.device == device && a.space == AddressSpace::kTorchBlock) blocks.push_back(a.address);
  });
  for (uint64_t address : blocks) find_segment_of_block(address);
  uint64_t bytes = 0;
  for (const auto& [address, size] : driver_pointers_) {
    const LiveAllocation& a = *live_.find(AddressSpace::kDriverPointer, address);
    if (a.device == device && a.held_blocks) bytes = saturating_add(bytes, size);
  }
  return bytes;
}

void MemoryModel::end_attach_record() {
  applying_attach_record_ = true;  // the peaks it raises are reached before the next event (Peak::at_attach)
  for (DeviceState* state : touched_) {
    update_peaks(*state);
    // The live set is rebuilt one record at a time: its totals mean something once every record is read, so the
    // totals callback hears of them once, before the next event (notify_attach_totals).
    if (on_totals_changed_ &&
        std::find(attach_totals_held_.begin(), attach_totals_held_.end(), state->device) == attach_totals_held_.end())
      attach_totals_held_.push_back(state->device);
  }
  if (process_touched_) {
    update_process_peaks();
    process_touched_ = false;
  }
  applying_attach_record_ = false;
  attach_totals_time_ns_ = now_ns_;
  update_torch_fast_path_ready();
}

void MemoryModel::notify_held_attach_totals() {
  std::vector<int32_t> held;
  held.swap(attach_totals_held_);
  for (int32_t device : held) notify_if_changed(devices_.at(device), last_totals_[device], attach_totals_time_ns_);
  update_torch_fast_path_ready();
}

bool MemoryModel::take_from_unlisted(AddressSpace space, int32_t device, uint64_t size_bytes) {
  if (unlisted_before_attach_.empty()) return false;
  auto it = unlisted_before_attach_.find({device, space});
  if (it == unlisted_before_attach_.end() || it->second == 0) return false;
  // A free that does not say its size takes nothing: it is still one of the aggregate's blocks.
  uint64_t taken = std::min(it->second, size_bytes);
  it->second -= taken;
  charge(LiveAllocation{.space = space, .before_attach = true, .device = device, .size_bytes = taken}, -1);
  return true;
}

void MemoryModel::finish() {
  notify_attach_totals();
  if (!exit_snapshot_taken_) snapshot_live_at_exit();
  keep_only_leak_candidates();
}

void MemoryModel::on_alloc(const EventFields& event, AddressSpace space) {
  if (event.result() != 0) {
    ++health_.error_result_allocations;
    return;
  }
  LiveAllocation a{.space = space,
                   .memory = memory_of(event),
                   .device = event.device(),
                   .size_bytes = event.size(),
                   .stack_id = event.stack_id(),
                   .time_ns = now_ns_,
                   .event_index = event_index_,
                   .address = event.address(),
                   .context = event.context()};
  if (a.memory == proto::MEMORY_MANAGED) ++health_.managed_allocations;
  add_live(a);
  if (space == AddressSpace::kTorchBlock) note_torch_totals(event, a.device);
}

void MemoryModel::add_live(const LiveAllocation& a) {
  if (const LiveAllocation* old = live_.insert(a)) {
    // The old allocation's free was never seen: drop it so totals do not keep it forever.
    ++health_.duplicate_allocations;
    release(*old);
    live_.insert(a);
  }
  site_first_times(a.device).note(a.stack_id, now_ns_, site_array_entries_left_);
  charge(a, +1);
  if (on_live_changed_) on_live_changed_(a, true);
  switch (a.space) {
    case AddressSpace::kTorchBlock:
      if (!segment_index_active_) activate_segment_index();
      torch_blocks_.add(a.address, a.size_bytes);
      if (incremental_fragmentation_) free_space_.add_block(a.address, a.size_bytes);
      mark_segment_of_block(a.address);
      break;
    case AddressSpace::kDriverPointer:
      if (segment_index_active_ && a.memory == proto::MEMORY_DEVICE) {
        driver_pointers_[a.address] = a.size_bytes;
        last_segment_bytes_ = 0;
      }
      break;
    case AddressSpace::kDriverHandle:
      handles_[a.address] = HandleState{};
      mapped_segments_stale_ = true;  // mappings of it may now count
      if (incremental_fragmentation_) retrack_handle(a.address, true);
      break;
    case AddressSpace::kPoolBlock: break;
  }
}

void MemoryModel::release(const LiveAllocation& a) {
  if (on_live_changed_) on_live_changed_(a, false);
  charge(a, -1);
  if (a.before_attach && a.charged_to_device() && valid_device_ordinal(a.device)) {
    AttachFacts& facts = attach_facts_[a.device];
    ++(is_block_space(a.space) ? facts.block_frees : facts.driver_frees);
  }
  switch (a.space) {
    case AddressSpace::kTorchBlock:
      torch_blocks_.remove(a.address);
      if (incremental_fragmentation_) free_space_.remove_block(a.address);
      break;
    case AddressSpace::kDriverPointer:
      if (driver_pointers_.erase(a.address)) last_segment_bytes_ = 0;
      if (a.held_blocks && incremental_fragmentation_) free_space_.remove_segment({a.address, kDriverSegment});
      break;
    case AddressSpace::kDriverHandle:
      handles_.erase(a.address);
      mapped_segments_stale_ = true;
      if (incremental_fragmentation_) retrack_handle(a.address, false);
      break;
    case AddressSpace::kPoolBlock: break;
  }
  live_.erase(a);  // last: `a` is the table's own entry
}

void MemoryModel::on_free(const EventFields& event, AddressSpace space) {
  if (event.result() == kTeardownFreeResult) ++health_.teardown_frees;
  else if (event.result() != 0) {
    ++health_.failed_frees;
    return;
  }
  if (event.address() == 0 && space != AddressSpace::kDriverHandle) return;  // free(nullptr) is a no-op
  LiveAllocation* it = live_.find(space, event.address());
  // cudaFree of memory from cudaMallocAsync is legal: it frees the pool block.
  if (!it && space == AddressSpace::kDriverPointer) it = live_.find(AddressSpace::kPoolBlock, event.address());
  if (!it) {
    if (live_.was_freed(space, event.address())) ++health_.double_frees;
    else if (take_from_unlisted(space, event.device(), event.size())) ++health_.frees_of_unlisted_before_attach;
    else ++health_.unknown_frees;
    if (space == AddressSpace::kTorchBlock) note_torch_totals(event, event.device());
    return;
  }
  int32_t device = it->device;
  if (space == AddressSpace::kDriverHandle) {
    // The driver keeps a released handle's memory while any mapping of it remains (cuMemRelease,
    // CUDA driver API: "the memory will be freed when all outstanding mappings are unmapped").
    HandleState& handle = handles_[event.address()];
    if (handle.mappings > 0) {
      handle.released = true;
      return;
    }
  }
  // Size and device come from the allocation: the free may not say its size, and may run while
  // another device is current.
  if (space == AddressSpace::kDriverPointer && it->held_blocks) release_torch_segment(device, it->size_bytes);
  release(*it);
  if (space == AddressSpace::kTorchBlock) note_torch_totals(event, event.device() >= 0 ? event.device() : device);
}

void MemoryModel::on_map(const EventFields& event) {
  ++health_.maps;
  if (event.result() != 0) return;
  mapped_segments_stale_ = true;
  if (auto old = mappings_.find(event.address()); old != mappings_.end()) {
    // A second map of a still-mapped address: the unmap was not seen; the old mapping is gone.
    if (auto h = handles_.find(old->second.handle); h != handles_.end() && h->second.mappings) --h->second.mappings;
    if (incremental_fragmentation_) untrack_mapping(old->first, old->second.handle);
  }
  mappings_[event.address()] = Mapping{event.handle(), event.size()};
  if (incremental_fragmentation_) track_mapping(event.address());
  auto handle = handles_.find(event.handle());
  if (handle == handles_.end()) return;
  ++handle->second.mappings;
  // An imported handle does not say its size (cuMemImportFromShareableHandle); its mapping does.
  LiveAllocation* it = live_.find(AddressSpace::kDriverHandle, event.handle());
  if (it && it->memory == proto::MEMORY_IMPORTED && it->size_bytes == 0) {
    it->size_bytes = event.size();
    charge(LiveAllocation{.memory = proto::MEMORY_IMPORTED, .device = it->device, .size_bytes = event.size()}, +1);
  }
}

void MemoryModel::on_unmap(const EventFields& event) {
  ++health_.unmaps;
  if (event.result() != 0) return;
  mapped_segments_stale_ = true;
  // cuMemUnmap(ptr, size) unmaps every mapping in the range.
  uint64_t end = event.address() + std::max<uint64_t>(event.size(), 1);
  if (end < event.address()) end = UINT64_MAX;
  for (auto m = mappings_.lower_bound(event.address()); m != mappings_.end() && m->first < end;) {
    uint64_t handle_value = m->second.handle;
    bool expandable_segment_page = reservations_with_blocks_.count(reservation_of(m->first)) > 0;
    uint64_t page_bytes = m->second.size_bytes;
    if (incremental_fragmentation_) untrack_mapping(m->first, handle_value);
    m = mappings_.erase(m);
    auto handle = handles_.find(handle_value);
    if (expandable_segment_page) {
      if (const LiveAllocation* page = live_.find(AddressSpace::kDriverHandle, handle_value))
        release_torch_segment(page->device, page_bytes);
    }
    if (handle == handles_.end() || handle->second.mappings == 0) continue;
    if (--handle->second.mappings == 0 && handle->second.released) {
      if (const LiveAllocation* it = live_.find(AddressSpace::kDriverHandle, handle_value)) release(*it);
    }
  }
}

void MemoryModel::on_address_reserve(const EventFields& event, int64_t sign) {
  ++(sign > 0 ? health_.address_reserves : health_.address_frees);
  if (event.result() != 0) return;
  mapped_segments_stale_ = true;  // expandable segments split where reservations do
  if (!incremental_fragmentation_) return change_reservation(event, sign);
  // The pages from the reservation's start to the next reservation's start may change reservation:
  // they leave their expandable segments and come back in the ones they are in now.
  std::vector<uint64_t> moved;
  auto next = reservations_.upper_bound(event.address());
  for (auto m = mappings_.lower_bound(event.address());
       m != mappings_.end() && (next == reservations_.end() || m->first < next->first); ++m) {
    moved.push_back(m->first);
    mapped_runs_.remove(free_space_, m->first);
  }
  change_reservation(event, sign);
  for (uint64_t address : moved) track_mapping(address);
}

void MemoryModel::change_reservation(const EventFields& event, int64_t sign) {
  uint64_t& total = process_.address_space_reserved_bytes;
  process_touched_ = true;
  if (sign > 0) {
    if (auto old = reservations_.find(event.address()); old != reservations_.end())
      total -= std::min(total, old->second);
    reservations_[event.address()] = event.size();
    total = saturating_add(total, event.size());
    return;
  }
  auto it = reservations_.find(event.address());
  if (it == reservations_.end()) return;
  reservations_with_blocks_.erase(it->first);
  total -= std::min(total, it->second);
  reservations_.erase(it);
}

void MemoryModel::on_pool_sample(const EventFields& event) {
  ++health_.pool_samples;
  DeviceState& state = device_state(event.device());
  auto key = std::make_pair(event.device(), event.address());
  uint64_t previous = 0;
  if (auto it = pool_samples_.find(key); it != pool_samples_.end()) previous = it->second;
  if (event.address() == 0) {
    state.graph_reserved_bytes = event.size();
  } else {
    // The first sample of a pool replaces what stood for the pools since attach (apply_attach_baseline).
    state.pool_reserved_sampled_bytes =
        saturating_sub(state.pool_reserved_sampled_bytes, state.attach_pool_reserved_bytes);
    state.attach_pool_reserved_bytes = 0;
    state.pool_reserved_sampled_bytes =
        saturating_add(saturating_sub(state.pool_reserved_sampled_bytes, previous), event.size());
  }
  // A pool at 0 (destroyed, or trimmed to nothing) adds nothing: forgetting it keeps the table as
  // small as the set of pools holding memory, however many pools a long job creates.
  if (event.size() == 0) pool_samples_.erase(key);
  else pool_samples_[key] = event.size();
}

void MemoryModel::on_device_usage(const EventFields& event) {
  ++health_.device_usage_samples;
  if (event.device() < 0) return;
  DeviceState& state = device_state(event.device());
  DeviceUsage usage{.time_ns = now_ns_,
                    .device_free_bytes = event.device_free_bytes(),
                    .device_total_bytes = event.device_total_bytes(),
                    .api = event.api(),
                    .accounted_bytes = state.totals().driver_bytes};
  if (event.has_process_used_bytes()) usage.process_used_bytes = event.process_used_bytes();
  if (event.has_other_processes_used_bytes()) usage.other_processes_used_bytes = event.other_processes_used_bytes();
  state.last_usage = usage;
  // The highest use of this process; without NVML's per-process figure, the least free memory.
  const std::optional<DeviceUsage>& peak = state.peak_usage;
  bool higher = !peak || (usage.process_used_bytes
                              ? !peak->process_used_bytes || *usage.process_used_bytes > *peak->process_used_bytes
                              : !peak->process_used_bytes && usage.device_free_bytes < peak->device_free_bytes);
  if (higher) state.peak_usage = usage;
}

void MemoryModel::on_graph_node(const EventFields& event) {
  if (event.result() != 0) return;
  if (graph_nodes_kept_ >= kMaxGraphNodes) {
    ++health_.graph_nodes_not_kept;
    return;
  }
  ++graph_nodes_kept_;
  GraphNode node{event.kind() == proto::ALLOC, event.device(), event.address(), event.size(), event.stack_id()};
  if (event.graph() != 0) graph_nodes_[event.graph()].push_back(node);
  else capture_nodes_[event.capture_id()].push_back(node);
}

void MemoryModel::on_graph_launch(const EventFields& event) {
  if (event.result() != 0) return;
  if (event.kind() == proto::GRAPH_CAPTURED) {
    // The capture made a new graph: its memory nodes are the ones recorded under the capture's id.
    if (auto old = graph_nodes_.find(event.graph()); old != graph_nodes_.end()) {
      graph_nodes_kept_ -= old->second.size();
      graph_nodes_.erase(old);
    }
    auto nodes = capture_nodes_.extract(event.capture_id());
    if (!nodes.empty()) graph_nodes_[event.graph()] = std::move(nodes.mapped());
    return;
  }
  if (event.kind() == proto::GRAPH_INSTANTIATE) {
    if (exec_graphs_.size() >= kMaxGraphExecs && !exec_graphs_.count(event.address())) {
      ++health_.graph_instantiations_not_kept;
      return;
    }
    exec_graphs_[event.address()] = event.graph();
    return;
  }
  auto exec = exec_graphs_.find(event.address());
  if (exec == exec_graphs_.end()) {
    ++health_.unknown_graph_launches;
    return;
  }
  auto graph = graph_nodes_.find(exec->second);
  if (graph == graph_nodes_.end()) return;
  uint64_t replays = saturating_add(graph_node_replays_, graph->second.size());
  if (replays > saturating_add(graph_replay_slack_, saturating_mul(graph_replays_per_event_, event_index_ + 1))) {
    ++health_.graph_launches_not_replayed;
    return;
  }
  graph_node_replays_ = replays;
  // Nodes are in the order they were added, which respects their dependencies: a free node comes
  // after the allocation node it frees.
  for (const GraphNode& node : graph->second) {
    if (node.alloc) {
      add_live(LiveAllocation{.space = AddressSpace::kPoolBlock,
                              .graph = true,
                              .device = node.device,
                              .size_bytes = node.size_bytes,
                              .stack_id = node.stack_id,
                              .time_ns = now_ns_,
                              .event_index = event_index_,
                              .address = node.address});
    } else if (const LiveAllocation* it = live_.find(AddressSpace::kPoolBlock, node.address)) {
      release(*it);
    }
  }
}

void MemoryModel::on_context_destroy(const EventFields& event) {
  DeviceState& state = device_state(event.device());
  ++state.context_destroys;
  // Which allocations were the destroyed context's: those made in it (Event.context). Pool blocks and
  // allocations whose context is not known go with the device's primary context: a reset (cudaDeviceReset,
  // cuDevicePrimaryCtxReset) or a destroy that does not name its context; destroying a context made with
  // cuCtxCreate leaves them, as it leaves the primary context's own allocations.
  bool primary = event.address() == 0 || event.api() == proto::CUDA_DEVICE_RESET ||
                 event.api() == proto::CU_DEVICE_PRIMARY_CTX_RESET;
  auto of_this_context = [&](const LiveAllocation& a) {
    if (a.device != event.device() || !freed_with_context(a)) return false;
    if (a.context == 0) return primary;
    return event.address() == 0 || a.context == event.address();
  };
  std::vector<std::pair<AddressSpace, uint64_t>> freed;
  live_.for_each([&](const LiveAllocation& a) {
    if (of_this_context(a)) freed.emplace_back(a.space, a.address);
  });
  for (const auto& [space, address] : freed) {
    const LiveAllocation* it = live_.find(space, address);
    state.context_freed_bytes = saturating_add(state.context_freed_bytes, it->size_bytes);
    release(*it);
  }
  if (!primary) return;
  // The device's pools (the graph memory pool too) go with its primary context.
  std::erase_if(pool_samples_, [&](const auto& entry) { return entry.first.first == event.device(); });
  state.pool_reserved_sampled_bytes = 0;
  state.attach_pool_reserved_bytes = 0;
  state.graph_reserved_bytes = 0;
}

bool MemoryModel::raises_peak_allocated(const EventFields& event, int32_t device) const {
  if (event.kind() != proto::ALLOC || event.result() != 0 || event.size() == 0 || event.device() != device ||
      event.graph() != 0 || event.capture_id() != 0)
    return false;
  auto it = devices_.find(device);
  if (it == devices_.end()) return false;
  const DeviceState& state = it->second;
  AddressSpace space = space_of(event);
  proto::Memory memory = memory_of(event);
  // What charge() adds the size to: blocks (torch_block_bytes or pool_block_bytes) for block-space
  // device memory, driver_bytes (driver_layer_bytes or array_bytes) for driver-space device memory and
  // arrays.
  uint64_t now_bytes;
  if (state.block_layer_seen) {
    if (!is_block_space(space) || memory != proto::MEMORY_DEVICE) return false;
    now_bytes = state.blocks_bytes();
  } else {
    // A PyTorch block would make the device's allocated total the blocks from now on, whatever its memory.
    if (is_block_space(space) || (memory != proto::MEMORY_DEVICE && memory != proto::MEMORY_ARRAY)) return false;
    now_bytes = state.totals().driver_bytes;
  }
  uint64_t after_bytes = saturating_add(now_bytes, event.size());
  return now_bytes == state.peak_allocated().bytes && after_bytes > now_bytes && !live_.find(space, event.address());
}

void MemoryModel::activate_segment_index() {
  segment_index_active_ = true;
  live_.for_each([this](const LiveAllocation& a) {
    if (a.space == AddressSpace::kDriverPointer && a.memory == proto::MEMORY_DEVICE)
      driver_pointers_[a.address] = a.size_bytes;
  });
  last_segment_bytes_ = 0;
}

void MemoryModel::mark_torch_segment(LiveAllocation& segment) {
  if (!segment.held_blocks && incremental_fragmentation_)
    free_space_.add_segment({segment.address, kDriverSegment}, {segment.address, segment.address + segment.size_bytes},
                            segment.device);
  segment.held_blocks = true;
}

void MemoryModel::find_segment_of_block(uint64_t address) {
  // The driver allocation (PyTorch segment) or mapping (expandable segment page) the block lies in.
  if (auto it = driver_pointers_.upper_bound(address); it != driver_pointers_.begin()) {
    --it;
    if (address - it->first < it->second) {
      mark_torch_segment(*live_.find(AddressSpace::kDriverPointer, it->first));
      // Up to the next allocation's start (overlapping ones come only from damaged traces) this lookup
      // finds the same allocation again.
      auto next = std::next(it);
      last_segment_start_ = it->first;
      last_segment_bytes_ = next == driver_pointers_.end() ? it->second : std::min(it->second, next->first - it->first);
      return;
    }
  }
  if (auto it = mappings_.upper_bound(address); it != mappings_.begin()) {
    --it;
    if (address - it->first < it->second.size_bytes) {
      if (!it->second.held_blocks) mapped_segments_stale_ = true;
      it->second.held_blocks = true;
      if (incremental_fragmentation_) mapped_runs_.mark_held(free_space_, it->first);
      if (uint64_t reservation = reservation_of(address)) reservations_with_blocks_.insert(reservation);
    }
  }
}

uint64_t MemoryModel::reservation_of(uint64_t address) const {
  auto r = reservations_.upper_bound(address);
  if (r == reservations_.begin()) return 0;
  --r;
  return address - r->first < r->second ? r->first : 0;
}

// PyTorch reports its reserved total with each block, but gives segments back to the driver without a
// report (torch.cuda.empty_cache(), and before retrying a failed cudaMalloc): a cudaFree of a segment, or
// the unmap of an expandable segment's page, is that much less reserved until its next report says so.
// A segment is a driver allocation (or reservation) a PyTorch block was ever placed in.
void MemoryModel::release_torch_segment(int32_t device, uint64_t bytes) {
  DeviceState& state = device_state(device);
  if (!state.allocator_layer_seen) return;
  state.torch_reserved_bytes -= std::min(state.torch_reserved_bytes, bytes);
}

void MemoryModel::charge(const LiveAllocation& a, int64_t sign) {
  bool allocating = sign > 0;
  auto add = [allocating, &a](uint64_t& bytes) {
    if (allocating) bytes = saturating_add(bytes, a.size_bytes);
    else bytes -= std::min(bytes, a.size_bytes);  // never below zero
  };
  // The counts are of the trace's own allocations and their frees: what was live at attach is counted apart
  // (AttachFacts), its frees by release().
  uint64_t uncounted = 0;
  auto count = [&](uint64_t& allocations, uint64_t& frees) -> uint64_t& {
    return a.before_attach ? uncounted : allocating ? allocations : frees;
  };
  switch (a.memory) {
    case proto::MEMORY_HOST_PINNED: process_touched_ = true; return add(process_.host_pinned_bytes);
    case proto::MEMORY_HOST_REGISTERED: process_touched_ = true; return add(process_.host_registered_bytes);
    case proto::MEMORY_MANAGED: return add(device_state(a.device).managed_bytes);
    case proto::MEMORY_IMPORTED: return add(device_state(a.device).imported_bytes);
    case proto::MEMORY_ARRAY: {
      DeviceState& state = device_state(a.device);
      ++count(state.driver_allocations, state.driver_frees);
      return add(state.array_bytes);
    }
    default: break;
  }
  DeviceState& state = device_state(a.device);
  switch (a.space) {
    case AddressSpace::kDriverPointer:
    case AddressSpace::kDriverHandle:
      add(state.driver_layer_bytes);
      ++count(state.driver_allocations, state.driver_frees);
      break;
    case AddressSpace::kTorchBlock:
      add(state.torch_block_bytes);
      state.block_layer_seen = true;
      ++count(state.block_allocations, state.block_frees);
      break;
    case AddressSpace::kPoolBlock:
      add(state.pool_block_bytes);
      if (a.graph) add(state.graph_block_bytes);
      state.block_layer_seen = true;
      ++count(state.block_allocations, state.block_frees);
      break;
  }
}

void MemoryModel::update_peaks_and_notify(DeviceState& state) {
  update_peaks(state);
  if (!on_totals_changed_) return;
  notify_if_changed(state, &state == cached_state_ ? *cached_last_totals_ : last_totals_[state.device], now_ns_);
}

void MemoryModel::update_peaks(DeviceState& state) {
  DeviceTotals t = state.totals();
  auto raise = [this](Peak& peak, uint64_t bytes) {
    return memtrace::raise(peak, bytes, now_ns_, event_index_, applying_attach_record_);
  };
  if (raise(state.peak_driver, t.driver_bytes)) allocated_peak_raised_ = true;
  if (raise(state.peak_blocks, state.blocks_bytes())) allocated_peak_raised_ = true;
  raise(state.peak_torch_reserved, state.torch_reserved_bytes);
  raise(state.peak_array, state.array_bytes);
  raise(state.peak_managed, state.managed_bytes);
  raise(state.peak_imported, state.imported_bytes);
  raise(state.peak_graph, state.graph_bytes());
  raise(state.peak_pools_reserved, state.pools_reserved_bytes());
}

void MemoryModel::notify_if_changed(const DeviceState& state, std::optional<DeviceTotals>& last, int64_t time_ns) {
  DeviceTotals t = state.totals();
  if (last == t) return;
  last = t;
  on_totals_changed_(state.device, time_ns, t);
}

std::map<int32_t, LayerHint> MemoryModel::layer_hints() const {
  std::map<int32_t, LayerHint> hints;
  for (const auto& [device, state] : devices_)
    hints[device] = LayerHint{state.block_layer_seen, state.allocator_layer_seen};
  return hints;
}

void MemoryModel::for_each_allocated(int32_t device, const std::function<void(const LiveAllocation&)>& visit) const {
  visit_allocated(device, visit);
}

std::map<std::pair<int32_t, uint64_t>, int64_t> MemoryModel::first_allocation_ns() const {
  std::map<std::pair<int32_t, uint64_t>, int64_t> times;
  for (const auto& [device, sites] : first_allocation_ns_) {
    int32_t site_device = device;  // clang before 16 cannot capture a structured binding (C++20 allows it)
    sites.for_each([&](uint64_t stack_id, int64_t ns) { times.emplace(std::pair(site_device, stack_id), ns); });
  }
  return times;
}

std::map<std::pair<int32_t, uint64_t>, int64_t> MemoryModel::first_allocation_ns(
    const std::vector<LiveAllocation>& allocations) const {
  std::map<std::pair<int32_t, uint64_t>, int64_t> times;
  for (const LiveAllocation& a : allocations) {
    auto sites = first_allocation_ns_.find(a.device);
    if (sites == first_allocation_ns_.end()) continue;
    if (const int64_t* ns = sites->second.find(a.stack_id)) times.emplace(std::pair(a.device, a.stack_id), *ns);
  }
  return times;
}

void MemoryModel::update_process_peaks() {
  raise(process_.peak_host_pinned, process_.host_pinned_bytes, now_ns_, event_index_, applying_attach_record_);
  raise(process_.peak_host_registered, process_.host_registered_bytes, now_ns_, event_index_, applying_attach_record_);
  raise(process_.peak_address_space_reserved, process_.address_space_reserved_bytes, now_ns_, event_index_,
        applying_attach_record_);
}

DeviceTotals MemoryModel::totals(int32_t device) const {
  auto it = devices_.find(device);
  return it == devices_.end() ? DeviceTotals{} : it->second.totals();
}

std::optional<DeviceUsage> MemoryModel::last_device_usage(int32_t device) const {
  auto it = devices_.find(device);
  return it == devices_.end() ? std::nullopt : it->second.last_usage;
}

Fragmentation MemoryModel::fragmentation(int32_t device) const {
  auto state = devices_.find(device);
  if (state == devices_.end()) return Fragmentation{};
  return fragmentation(device, state->second.layers());
}

Fragmentation MemoryModel::fragmentation(int32_t device, LayerHint layers) const {
  Fragmentation f;
  auto state = devices_.find(device);
  if (state == devices_.end()) return f;
  DeviceTotals t = state->second.totals(layers);
  f.reserved_minus_allocated_bytes = t.reserved_bytes > t.allocated_bytes ? t.reserved_bytes - t.allocated_bytes : 0;
  // Segments are PyTorch's: elsewhere (stream-ordered pools) the layout inside reserved memory is the
  // driver's and no event shows it.
  if (!layers.allocator_layer) return f;
  if (fragmentation_given_up_) return f;  // segments not known (see check_fragmentation_work)
  if (incremental_fragmentation_) return incremental_fragmentation(device, f, state->second.torch_block_bytes);
  f.segments_known = true;
  std::vector<AddressRange> segments;
  for (const auto& [address, size] : driver_pointers_) {
    const LiveAllocation& a = *live_.find(AddressSpace::kDriverPointer, address);
    if (a.device == device && a.held_blocks) segments.push_back({address, address + size});
  }
  for_each_mapped_segment([&](AddressRange segment, int32_t segment_device) {
    if (segment_device == device) segments.push_back(segment);
  });
  // Live blocks in no segment we can see (PyTorch's cudaMallocAsync backend keeps them in a pool):
  // the layout is the pool's, unknown.
  if (segments.empty() && state->second.torch_block_bytes > 0) {
    f.segments_known = false;
    return f;
  }
  f.segment_count = segments.size();
  const std::vector<Block>& blocks = torch_blocks_.sorted([this](std::vector<Block>& all) {
    live_.for_each([&](const LiveAllocation& a) {
      if (a.space == AddressSpace::kTorchBlock) all.push_back({a.address, a.size_bytes});
    });
  });
  f.largest_free_block_bytes = largest_free_block_bytes(segments, blocks);
  return f;
}

template <typename Visit>
void MemoryModel::for_each_mapped_segment(Visit&& visit) const {
  // Expandable segments: pages (cuMemCreate handles of one device) mapped one after another. Each
  // device's mappings, in address order, form runs split where the addresses leave a hole.
  struct Run {
    std::vector<AddressRange> mapped;
    bool held_blocks = false;  // a run that held a block anywhere is a segment
  };
  std::map<int32_t, Run> runs;
  auto flush = [&](int32_t device, Run& run) {
    if (run.held_blocks) {
      for (const AddressRange& r :
           contiguous_runs(run.mapped, [this](uint64_t start) { return reservation_of(start); }))
        visit(r, device);
    }
    run.mapped.clear();
    run.held_blocks = false;
  };
  for (const auto& [address, m] : mappings_) {
    const LiveAllocation* handle = live_.find(AddressSpace::kDriverHandle, m.handle);
    if (!handle || handle->memory != proto::MEMORY_DEVICE) continue;
    Run& run = runs[handle->device];
    if (!run.mapped.empty() && run.mapped.back().end != address) flush(handle->device, run);
    run.mapped.push_back({address, address + m.size_bytes});
    run.held_blocks = run.held_blocks || m.held_blocks;
  }
  for (auto& [device, run] : runs) flush(device, run);
}

void MemoryModel::refresh_mapped_segments() const {
  mapped_segments_stale_ = false;
  mapped_refresh_work_ += mappings_.size();
  std::vector<SegmentFreeSpace::Segment> now;
  for_each_mapped_segment([&](AddressRange r, int32_t device) {
    now.push_back(SegmentFreeSpace::Segment{{r.start, kMappedSegment}, r, device});
  });
  std::sort(now.begin(), now.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  std::vector<SegmentFreeSpace::Segment> before = free_space_.segments_of_kind(kMappedSegment);
  // Only what changed: the segments are by key in both.
  auto by_key = [](const auto& a, const auto& b) { return a.key < b.key; };
  size_t i = 0, j = 0;
  while (i < before.size() || j < now.size()) {
    if (j == now.size() || (i < before.size() && by_key(before[i], now[j]))) {
      free_space_.remove_segment(before[i++].key);
    } else if (i == before.size() || by_key(now[j], before[i])) {
      free_space_.add_segment(now[j].key, now[j].range, now[j].device);
      ++j;
    } else {
      if (!(before[i] == now[j])) {
        free_space_.remove_segment(before[i].key);
        free_space_.add_segment(now[j].key, now[j].range, now[j].device);
      }
      ++i;
      ++j;
    }
  }
}

void MemoryModel::check_fragmentation_work() {
  uint64_t work = free_space_.work() + mapped_runs_.work() + mapped_refresh_work_;
  if (work <= kFragmentationWorkSlack + kFragmentationWorkPerEvent * event_index_) return;
  incremental_fragmentation_ = false;
  fragmentation_given_up_ = true;
  fragmentation_unknown_from_event_ = event_index_;
  free_space_ = SegmentFreeSpace{};
  mapped_runs_ = MappedRuns{kMappedSegment};
  mappings_of_handle_.clear();
  update_torch_fast_path_ready();
}

void MemoryModel::track_mapping(uint64_t address) {
  const Mapping& m = mappings_.at(address);
  mappings_of_handle_[m.handle].insert(address);
  const LiveAllocation* handle = live_.find(AddressSpace::kDriverHandle, m.handle);
  if (handle && handle->memory == proto::MEMORY_DEVICE)
    mapped_runs_.add(free_space_, address, m.size_bytes, handle->device, reservation_of(address), m.held_blocks);
}

void MemoryModel::untrack_mapping(uint64_t address, uint64_t handle) {
  mapped_runs_.remove(free_space_, address);
  if (auto it = mappings_of_handle_.find(handle); it != mappings_of_handle_.end()) {
    it->second.erase(address);
    if (it->second.empty()) mappings_of_handle_.erase(it);
  }
}

void MemoryModel::retrack_handle(uint64_t handle, bool live) {
  // Only in a damaged trace is a handle mapped while it comes (a map before its cuMemCreate) or goes.
  auto it = mappings_of_handle_.find(handle);
  if (it == mappings_of_handle_.end()) return;
  std::vector<uint64_t> addresses(it->second.begin(), it->second.end());
  for (uint64_t address : addresses) {
    mapped_runs_.remove(free_space_, address);
    if (live) track_mapping(address);
  }
}

Fragmentation MemoryModel::incremental_fragmentation(int32_t device, Fragmentation f,
                                                     uint64_t torch_block_bytes) const {
  // The runs are the segments but where pages overlap: then the walk's rebuild after a VMM change.
  if (mapped_runs_.exact(free_space_)) mapped_segments_stale_ = false;
  else if (mapped_segments_stale_) refresh_mapped_segments();
  uint64_t segments = free_space_.segment_count(device);
  // As in the walk: blocks in no segment we can see leave the layout unknown.
  if (segments == 0 && torch_block_bytes > 0) return f;
  f.segments_known = true;
  f.segment_count = segments;
  f.largest_free_block_bytes = free_space_.largest_free_block_bytes(device);
  return f;
}

void MemoryModel::snapshot_live_at_exit() {
  exit_snapshot_taken_ = true;
  live_at_exit_.clear();
  // Filtered in finish(): whether a device has an allocator layer is known only at the end.
  live_.for_each([this](const LiveAllocation& a) {
    if (a.charged_to_device()) live_at_exit_.push_back(a);
  });
  // Hash order is arbitrary: keep the snapshot in allocation order so that reports are stable.
  std::sort(live_at_exit_.begin(), live_at_exit_.end(),
            [](const LiveAllocation& x, const LiveAllocation& y) { return x.event_index < y.event_index; });
}

BeforeAttachLive& MemoryModel::before_attach_entry(int32_t device, proto::Layer layer) {
  for (BeforeAttachLive& entry : before_attach_at_exit_)
    if (entry.device == device && entry.layer == layer) return entry;
  before_attach_at_exit_.push_back(BeforeAttachLive{.device = device, .layer = layer});
  return before_attach_at_exit_.back();
}

void MemoryModel::keep_only_leak_candidates() {
  before_attach_at_exit_.clear();
  auto layer_of = [](AddressSpace space) { return is_block_space(space) ? proto::LAYER_BLOCK : proto::LAYER_DRIVER; };
  std::erase_if(live_at_exit_, [&](const LiveAllocation& a) {
    auto it = devices_.find(a.device);
    if (it == devices_.end() || !it->second.counts_as_leak(a)) return true;
    if (!a.before_attach) return false;
    BeforeAttachLive& entry = before_attach_entry(a.device, layer_of(a.space));
    ++entry.allocations;
    entry.bytes = saturating_add(entry.bytes, a.size_bytes);
    return true;  // no call site: listed apart
  });
  for (const auto& [key, bytes_left] : unlisted_before_attach_) {
    auto it = devices_.find(key.first);
    LiveAllocation as_one{.space = key.second, .device = key.first};
    if (bytes_left == 0 || it == devices_.end() || !it->second.counts_as_leak(as_one)) continue;
    BeforeAttachLive& entry = before_attach_entry(key.first, layer_of(key.second));
    entry.unlisted_bytes = saturating_add(entry.unlisted_bytes, bytes_left);
  }
  std::sort(before_attach_at_exit_.begin(), before_attach_at_exit_.end(),
            [](const BeforeAttachLive& x, const BeforeAttachLive& y) {
              return std::pair(x.device, int(x.layer)) < std::pair(y.device, int(y.layer));
            });
}

}  // namespace memtrace
