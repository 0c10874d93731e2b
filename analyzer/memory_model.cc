#include "memory_model.h"

#include <algorithm>
#include <cstdint>

namespace memtrace {
namespace {

bool is_managed_api(proto::Api api) {
  return api == proto::CUDA_MALLOC_MANAGED || api == proto::CU_MEM_ALLOC_MANAGED;
}

bool is_stream_ordered_api(proto::Api api) {
  switch (api) {
    case proto::CUDA_MALLOC_ASYNC:
    case proto::CUDA_FREE_ASYNC:
    case proto::CUDA_MALLOC_FROM_POOL_ASYNC:
    case proto::CU_MEM_ALLOC_ASYNC:
    case proto::CU_MEM_FREE_ASYNC:
    case proto::CU_MEM_ALLOC_FROM_POOL_ASYNC:
      return true;
    default:
      return false;
  }
}

// The table an ALLOC/FREE event belongs to. The layer decides driver versus block; when a writer left
// the layer unset the API decides.
AddressSpace space_of(const proto::Event& e) {
  bool block = e.layer() == proto::LAYER_BLOCK ||
               (e.layer() == proto::LAYER_UNKNOWN &&
                (e.api() == proto::TORCH_ALLOCATOR || is_stream_ordered_api(e.api())));
  if (block) return e.api() == proto::TORCH_ALLOCATOR ? AddressSpace::kTorchBlock : AddressSpace::kPoolBlock;
  if (e.api() == proto::CU_MEM_CREATE || e.api() == proto::CU_MEM_RELEASE) return AddressSpace::kDriverHandle;
  return AddressSpace::kDriverPointer;
}

// Times come from untrusted deltas: saturate instead of overflowing (which would be undefined).
int64_t add_delta(int64_t now_ns, int64_t delta_ns) {
  int64_t sum;
  if (!__builtin_add_overflow(now_ns, delta_ns, &sum)) return sum;
  return delta_ns > 0 ? INT64_MAX : INT64_MIN;
}

}  // namespace

bool is_block_space(AddressSpace space) {
  return space == AddressSpace::kTorchBlock || space == AddressSpace::kPoolBlock;
}

DeviceTotals DeviceState::totals() const {
  DeviceTotals t;
  t.driver_bytes = driver_layer_bytes + pool_block_bytes;
  t.allocated_bytes = block_layer_seen ? torch_block_bytes + pool_block_bytes : t.driver_bytes;
  t.reserved_bytes = allocator_layer_seen ? torch_reserved_bytes : t.driver_bytes;
  return t;
}

bool DeviceState::counts_as_allocated(const LiveAllocation& a) const {
  if (a.managed || a.device != device) return false;
  // Without a block layer, allocated = driver, which includes pool blocks (none exist then anyway).
  return block_layer_seen ? is_block_space(a.space) : true;
}

bool DeviceState::counts_as_leak(const LiveAllocation& a) const {
  if (a.managed || a.device != device) return false;
  return allocator_layer_seen ? is_block_space(a.space) : true;
}

DeviceState& MemoryModel::device_state(int32_t device) {
  auto [it, inserted] = devices_.try_emplace(device);
  if (inserted) {
    it->second.device = device;
    if (auto hint = hints_.find(device); hint != hints_.end()) {
      it->second.block_layer_seen = hint->second.block_layer;
      it->second.allocator_layer_seen = hint->second.allocator_layer;
    }
  }
  if (std::find(touched_.begin(), touched_.end(), device) == touched_.end()) touched_.push_back(device);
  return it->second;
}

void MemoryModel::on_oom(const proto::Event& event) {
  OomEvent oom{event.size(), event.device(), event.device_free_bytes(), event.device_total_bytes(),
               event.stack_id(), now_ns_, event.api(), event.layer(), event.result(), 0, event.tid()};
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

void MemoryModel::apply(const proto::Event& event) {
  if (event.time_delta_ns() < 0) ++health_.backward_timestamps;
  now_ns_ = add_delta(now_ns_, event.time_delta_ns());
  touched_.clear();
  if (event.kind() != proto::OOM && !pending_driver_ooms_.empty()) pending_driver_ooms_.erase(event.tid());
  switch (event.kind()) {
    case proto::ALLOC:
      on_alloc(event, space_of(event));
      break;
    case proto::FREE:
      on_free(event, space_of(event));
      break;
    case proto::OOM:
      on_oom(event);
      break;
    case proto::MAP: ++health_.maps; break;
    case proto::UNMAP: ++health_.unmaps; break;
    case proto::ADDRESS_RESERVE: ++health_.address_reserves; break;
    case proto::ADDRESS_FREE: ++health_.address_frees; break;
    case proto::PYTHON_FINALIZING:
      if (!finalizing_time_ns_) {
        finalizing_time_ns_ = now_ns_;
        snapshot_live_at_exit();
      }
      break;
    default:
      break;
  }
  for (int32_t device : touched_) update_peaks_and_notify(devices_[device]);
  ++health_.events;
  ++event_index_;
}

void MemoryModel::apply_end(const proto::TraceEnd& end) {
  if (end.time_delta_ns() < 0) ++health_.backward_timestamps;
  now_ns_ = add_delta(now_ns_, end.time_delta_ns());
}

void MemoryModel::finish() {
  if (!exit_snapshot_taken_) snapshot_live_at_exit();
  keep_only_leak_candidates();
}

void MemoryModel::on_alloc(const proto::Event& event, AddressSpace space) {
  if (event.result() != 0) {
    ++health_.failed_allocations;
    return;
  }
  LiveAllocation a{space, is_managed_api(event.api()), event.device(), event.size(), event.stack_id(),
                   now_ns_, event_index_};
  Key key{space, event.address()};
  auto [it, inserted] = live_.try_emplace(key, a);
  if (!inserted) {
    // The old allocation's free was never seen: drop it so totals do not keep it forever.
    ++health_.duplicate_allocations;
    charge(device_state(it->second.device), it->second, -1);
    it->second = a;
  }
  freed_.erase(key);
  first_allocation_ns_.try_emplace({a.device, a.stack_id}, now_ns_);
  if (a.managed) ++health_.managed_allocations;
  charge(device_state(a.device), a, +1);
  if (space == AddressSpace::kTorchBlock) note_torch_totals(event, a.device);
}

void MemoryModel::on_free(const proto::Event& event, AddressSpace space) {
  if (event.result() == kTeardownFreeResult) ++health_.teardown_frees;
  else if (event.result() != 0) {
    ++health_.failed_frees;
    return;
  }
  if (event.address() == 0 && space != AddressSpace::kDriverHandle) return;  // free(nullptr) is a no-op
  Key key{space, event.address()};
  auto it = live_.find(key);
  // cudaFree of memory from cudaMallocAsync is legal: it frees the pool block.
  if (it == live_.end() && space == AddressSpace::kDriverPointer) {
    key = Key{AddressSpace::kPoolBlock, event.address()};
    it = live_.find(key);
    if (it == live_.end()) key = Key{space, event.address()};
  }
  if (it == live_.end()) {
    if (freed_.count(key)) ++health_.double_frees;
    else ++health_.unknown_frees;
    if (space == AddressSpace::kTorchBlock) note_torch_totals(event, event.device());
    return;
  }
  LiveAllocation a = it->second;
  live_.erase(it);
  if (freed_.size() < kMaxFreedRemembered) freed_.insert(key);
  // Size and device come from the allocation: the free may not say its size, and may run while
  // another device is current.
  charge(device_state(a.device), a, -1);
  if (space == AddressSpace::kTorchBlock) note_torch_totals(event, event.device() >= 0 ? event.device() : a.device);
}

void MemoryModel::charge(DeviceState& state, const LiveAllocation& a, int64_t sign) {
  if (a.managed) return;
  bool allocating = sign > 0;
  uint64_t* bytes = nullptr;
  switch (a.space) {
    case AddressSpace::kDriverPointer:
    case AddressSpace::kDriverHandle:
      bytes = &state.driver_layer_bytes;
      ++(allocating ? state.driver_allocations : state.driver_frees);
      break;
    case AddressSpace::kTorchBlock:
      bytes = &state.torch_block_bytes;
      state.block_layer_seen = true;
      ++(allocating ? state.block_allocations : state.block_frees);
      break;
    case AddressSpace::kPoolBlock:
      bytes = &state.pool_block_bytes;
      state.block_layer_seen = true;
      ++(allocating ? state.block_allocations : state.block_frees);
      break;
  }
  if (allocating) *bytes += a.size_bytes;
  else *bytes -= std::min(*bytes, a.size_bytes);  // never below zero
}

void MemoryModel::note_torch_totals(const proto::Event& event, int32_t device) {
  DeviceState& state = device_state(device);
  state.allocator_layer_seen = true;
  state.block_layer_seen = true;
  state.torch_reserved_bytes = event.allocator_reserved_bytes();
}

void MemoryModel::update_peaks_and_notify(DeviceState& state) {
  DeviceTotals t = state.totals();
  auto raise = [&](Peak& peak, uint64_t bytes) {
    if (bytes > peak.bytes) peak = Peak{bytes, now_ns_, event_index_};
  };
  raise(state.peak_driver, t.driver_bytes);
  raise(state.peak_blocks, state.torch_block_bytes + state.pool_block_bytes);
  raise(state.peak_torch_reserved, state.torch_reserved_bytes);
  auto [it, inserted] = last_totals_.try_emplace(state.device, t);
  if (!inserted && it->second == t) return;
  it->second = t;
  if (on_totals_changed_) on_totals_changed_(state.device, now_ns_, t);
}

std::map<int32_t, LayerHint> MemoryModel::layer_hints() const {
  std::map<int32_t, LayerHint> hints;
  for (const auto& [device, state] : devices_) hints[device] = LayerHint{state.block_layer_seen, state.allocator_layer_seen};
  return hints;
}

void MemoryModel::for_each_allocated(int32_t device,
                                     const std::function<void(const LiveAllocation&)>& visit) const {
  auto it = devices_.find(device);
  if (it == devices_.end()) return;
  for (const auto& [key, a] : live_)
    if (it->second.counts_as_allocated(a)) visit(a);
}

void MemoryModel::snapshot_live_at_exit() {
  exit_snapshot_taken_ = true;
  live_at_exit_.clear();
  // Filtered in finish(): whether a device has an allocator layer is known only at the end.
  for (const auto& [key, a] : live_)
    if (!a.managed) live_at_exit_.push_back(a);
  // Hash order is arbitrary: keep the snapshot in allocation order so that reports are stable.
  std::sort(live_at_exit_.begin(), live_at_exit_.end(),
            [](const LiveAllocation& x, const LiveAllocation& y) { return x.event_index < y.event_index; });
}

void MemoryModel::keep_only_leak_candidates() {
  std::erase_if(live_at_exit_, [this](const LiveAllocation& a) {
    auto it = devices_.find(a.device);
    return it == devices_.end() || !it->second.counts_as_leak(a);
  });
}

}  // namespace memtrace
