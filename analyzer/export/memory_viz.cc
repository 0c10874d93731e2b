#include "export/memory_viz.h"

#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "export/pickle_writer.h"
#include "model/replay.h"
#include "stacks/frame_roles.h"
#include "util/checked_math.h"

namespace memtrace {
namespace {

// PyTorch's small pool allocates its segments 2 MiB at a time (kSmallBuffer in CUDACachingAllocator.cpp); its
// large pool never makes a segment of that size with cudaMalloc (20 MiB, or a request rounded up to 2 MiB past
// 10 MiB).
constexpr uint64_t kSmallSegmentBytes = 2ull << 20;

// The kinds of segment memtrace shows: a driver allocation of device memory, one cuMemMap of device memory (an
// expandable segment is a run of them), a stream-ordered pool block.
enum class PieceKind : uint8_t { kDriver, kMapped, kPool };

struct Piece {
  uint64_t end = 0;
  PieceKind kind = PieceKind::kDriver;
  proto::Api api = proto::API_UNKNOWN;
  uint64_t stack_id = 0;
  uint64_t stream = 0;
  uint64_t event_index = 0;  // the event that made it live (the model's LiveAllocation::event_index)
  bool held_block = false;   // a PyTorch block was placed in it: one of PyTorch's segments
};

struct LiveBlock {
  uint64_t size_bytes = 0;
  uint64_t stack_id = 0;
  uint64_t stream = 0;
};

// What was left out or added to keep segments and device_traces consistent (memory_viz.h), all devices together.
struct Counts {
  uint64_t blocks_outside_segments = 0;    // block allocations not inside a live segment of their device
  uint64_t blocks_overlapping = 0;         // block allocations overlapping a live block
  uint64_t frees_of_unknown_blocks = 0;    // block frees of no live block
  uint64_t blocks_allocated_again = 0;     // allocations at a live block's address: the old one freed first
  uint64_t blocks_freed_with_segment = 0;  // live blocks given a free entry because their segment went
  uint64_t segments_overlapping = 0;       // segment allocations or maps overlapping a live segment
  // Mappings right next to a live driver or pool segment on the same stream, and such segments next to a live
  // mapping (DeviceTrace::touches_other_kind).
  uint64_t segments_next_to_mappings = 0;
};

// The name the tracer's API has in CUDA's headers, for the few that make segments.
const char* api_display_name(proto::Api api) {
  switch (api) {
    case proto::CUDA_MALLOC: return "cudaMalloc";
    case proto::CUDA_MALLOC_PITCH: return "cudaMallocPitch";
    case proto::CUDA_MALLOC_3D: return "cudaMalloc3D";
    case proto::CU_MEM_ALLOC: return "cuMemAlloc";
    case proto::CU_MEM_ALLOC_PITCH: return "cuMemAllocPitch";
    case proto::CU_MEM_MAP: return "cuMemMap";
    case proto::CUDA_MALLOC_ASYNC: return "cudaMallocAsync";
    case proto::CUDA_MALLOC_FROM_POOL_ASYNC: return "cudaMallocFromPoolAsync";
    case proto::CU_MEM_ALLOC_ASYNC: return "cuMemAllocAsync";
    case proto::CU_MEM_ALLOC_FROM_POOL_ASYNC: return "cuMemAllocFromPoolAsync";
    default: return proto::Api_Name(api).c_str();
  }
}

// Writes frame lists, each (label, stack) once: the writer refers back to it (pickle) or repeats it (JSON).
class FrameLists {
 public:
  FrameLists(FrameResolver& resolver, ValueWriter& w) : resolver_(resolver), w_(w) {}

  // The frames of `stack_id`, innermost first, as PyTorch writes them ({filename, line, name}), after one frame
  // {filename: "memtrace", line: 0, name: label} when `label` is not empty.
  void write(uint64_t stack_id, const std::string& label) {
    auto [it, added] = ids_.try_emplace({label, stack_id}, ids_.size());
    if (w_.repeat_or_remember(it->second)) return;
    w_.begin_list();
    if (!label.empty()) frame("memtrace", 0, label);
    for (const Frame& f : resolved(stack_id).frames) {
      if (f.python) frame(f.file, f.line, f.function);
      else frame(f.file.empty() ? f.module : f.file, f.line, f.function);
    }
    w_.end_list();
  }

  // The layer that asked for the memory, from the stack's native frames (stacks/frame_roles.h).
  const char* layer(uint64_t stack_id) {
    auto it = layers_.find(stack_id);
    if (it == layers_.end())
      it = layers_.emplace(stack_id, allocating_layer_name(allocating_layer(resolved(stack_id)))).first;
    return it->second;
  }

 private:
  ResolvedStack resolved(uint64_t stack_id) { return resolver_.resolve(stack_id); }
  void frame(const std::string& filename, uint32_t line, const std::string& name) {
    w_.begin_dict();
    w_.key("filename");
    w_.string(filename);
    w_.key("line");
    w_.unsigned_integer(line);
    w_.key("name");
    w_.string(name);
    w_.end_dict();
  }

  FrameResolver& resolver_;
  ValueWriter& w_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> ids_;
  std::unordered_map<uint64_t, const char*> layers_;
};

// "[memtrace] cudaMalloc: NCCL": the synthetic innermost frame of a segment, saying how it was obtained and for whom.
std::string segment_label(proto::Api api, const char* layer) {
  return std::string("[memtrace] ") + api_display_name(api) + ": " + layer;
}

// One device's trace entries, written as the trace is replayed, and its live segments and blocks, kept for the
// `segments` written after every device's entries. The observer of replay_trace (model/replay.h).
class DeviceTrace {
 public:
  DeviceTrace(int32_t device, ValueWriter& w, FrameLists& frames, uint64_t start_unix_ns, Counts& counts)
      : device_(device), w_(w), frames_(frames), start_unix_ns_(start_unix_ns), counts_(counts) {}

  // Replays the trace at `path` (model/replay.h) into a model of its own, writing this device's entries. Throws
  // TraceError where the trace no longer reads.
  void replay(const std::string& path) {
    MemoryModel model;
    model_ = &model;
    replay_trace(path, {}, model, *this);
    model_ = nullptr;
  }

  ReplayStep after_event(const EventFields& e) {
    index_ = model_->next_event_index() - 1;
    switch (e.kind()) {
      case proto::PYTHON_FINALIZING:
        ended_at_finalizing_ = true;
        end_time_us_ = time_us();
        return ReplayStep::kStop;
      case proto::ALLOC: on_alloc(e); break;
      case proto::FREE: on_free(e); break;
      case proto::MAP: on_map(e); break;
      case proto::UNMAP: on_unmap(e); break;
      case proto::OOM: on_oom(e); break;
      case proto::CONTEXT_DESTROY: on_context_destroy(); break;
      default: break;
    }
    end_time_us_ = time_us();
    return ReplayStep::kGoOn;
  }

  // An allocation live at attach (LiveAtAttach, applied to the model before this call): written as this device's
  // entries of an ALLOC of its layer at that moment (time 0 of an attached trace), so that later frees find it.
  void on_record(const proto::Record& record) {
    if (!record.has_live_at_attach()) return;
    const proto::LiveAtAttach& live = record.live_at_attach();
    if (live.address() == 0 || live.device() != device_) return;  // an aggregate of unlisted blocks has no address
    index_ = model_->next_event_index();  // the model's LiveAllocation::event_index of it
    on_alloc(alloc_event_of(live));
  }

  bool ended_at_finalizing() const { return ended_at_finalizing_; }
  uint64_t end_time_us() const { return end_time_us_; }

  // This device's entries of `segments`: the live segments in address order, an expandable segment being a run
  // of adjacent mappings on one stream.
  void write_segments() const {
    for (auto it = pieces_.begin(); it != pieces_.end();) {
      uint64_t start = it->first;
      const Piece& first = it->second;
      uint64_t end = first.end;
      bool held = first.held_block;
      auto next = std::next(it);
      if (first.kind == PieceKind::kMapped) {
        while (next != pieces_.end() && next->first == end && next->second.kind == PieceKind::kMapped &&
               next->second.stream == first.stream) {
          held = held || next->second.held_block;
          end = next->second.end;
          ++next;
        }
      }
      write_segment(start, end, first, held);
      it = next;
    }
  }

 private:
  uint64_t time_us() const {
    int64_t now = model_->now_ns();
    uint64_t ns = now >= 0 ? saturating_add(start_unix_ns_, uint64_t(now))
                           : (start_unix_ns_ > uint64_t(-(now + 1)) ? start_unix_ns_ + uint64_t(now) : 0);
    return ns / 1000;
  }

  // One trace entry. `label` non-empty: a segment's, with its synthetic frame.
  void entry(const char* action, uint64_t addr, uint64_t size, uint64_t stream, uint64_t stack_id,
             const std::string& label, bool oom = false) {
    w_.begin_dict();
    w_.key("action");
    w_.string(action);
    w_.key(oom ? "device_free" : "addr");
    w_.unsigned_integer(addr);
    w_.key("size");
    w_.unsigned_integer(size);
    w_.key("stream");
    w_.unsigned_integer(stream);
    w_.key("time_us");
    w_.unsigned_integer(time_us());
    w_.key("frames");
    frames_.write(stack_id, label);
    w_.end_dict();
  }

  void on_alloc(const EventFields& e) {
    if (e.device() != device_) return;
    if (e.layer() == proto::LAYER_DRIVER) {
      const LiveAllocation* a = model_->find_live(AddressSpace::kDriverPointer, e.address());
      if (a && a->event_index == index_ && a->memory == proto::MEMORY_DEVICE && a->device == device_)
        add_piece(e, e.address(), a->size_bytes, PieceKind::kDriver, "segment_alloc");
    } else if (e.layer() == proto::LAYER_BLOCK && e.api() == proto::TORCH_ALLOCATOR) {
      on_block_alloc(e);
    } else if (e.layer() == proto::LAYER_BLOCK && e.graph() == 0 && e.capture_id() == 0) {
      const LiveAllocation* a = model_->find_live(AddressSpace::kPoolBlock, e.address());
      if (a && a->event_index == index_ && a->device == device_)
        add_piece(e, e.address(), a->size_bytes, PieceKind::kPool, "segment_alloc");
    }
  }

  void on_free(const EventFields& e) {
    if (e.layer() == proto::LAYER_BLOCK && e.api() == proto::TORCH_ALLOCATOR) {
      if (e.device() == device_) on_block_free(e);
      return;
    }
    // A driver free names the current device, not the allocation's: found by address.
    auto it = pieces_.find(e.address());
    if (it == pieces_.end() || it->second.kind == PieceKind::kMapped) return;
    if (!still_live(it)) release(it, "segment_free");
  }

  // Whether the model still holds the allocation that made `it` (a failed free leaves it live).
  bool still_live(std::map<uint64_t, Piece>::iterator it) const {
    AddressSpace space = it->second.kind == PieceKind::kPool ? AddressSpace::kPoolBlock : AddressSpace::kDriverPointer;
    const LiveAllocation* a = model_->find_live(space, it->first);
    return a && a->event_index == it->second.event_index;
  }

  void on_context_destroy() {
    for (auto it = pieces_.begin(); it != pieces_.end();) {
      auto next = std::next(it);
      if (it->second.kind != PieceKind::kMapped && !still_live(it)) release(it, "segment_free");
      it = next;
    }
  }

  void on_map(const EventFields& e) {
    if (e.result() != 0) return;
    const LiveAllocation* h = model_->find_live(AddressSpace::kDriverHandle, e.handle());
    if (!h || h->memory != proto::MEMORY_DEVICE || h->device != device_) return;
    add_piece(e, e.address(), e.size(), PieceKind::kMapped, "segment_map");
  }

  void on_unmap(const EventFields& e) {
    if (e.result() != 0) return;
    uint64_t end = saturating_add(e.address(), e.size());
    for (auto it = pieces_.lower_bound(e.address()); it != pieces_.end() && it->first < end;) {
      auto next = std::next(it);
      if (it->second.kind == PieceKind::kMapped && it->second.end <= end) release(it, "segment_unmap");
      it = next;
    }
  }

  void on_oom(const EventFields& e) {
    if (e.device() != device_) return;
    entry("oom", e.device_free_bytes(), e.size(), e.stream(), e.stack_id(), "", /*oom=*/true);
  }

  // A new segment (or mapping) [start, start + size): written unless it is empty, wraps or overlaps a live one.
  void add_piece(const EventFields& e, uint64_t start, uint64_t size, PieceKind kind, const char* action) {
    uint64_t end = start + size;
    if (size == 0 || end < start) return;
    auto next = pieces_.lower_bound(start);
    bool overlaps = (next != pieces_.end() && next->first < end) ||
                    (next != pieces_.begin() && std::prev(next)->second.end > start);
    if (overlaps) {
      ++counts_.segments_overlapping;
      return;
    }
    if (touches_other_kind(next, start, end, kind, e.stream())) {
      ++counts_.segments_next_to_mappings;
      return;
    }
    Piece p;
    p.end = end;
    p.kind = kind;
    p.api = e.api();
    p.stack_id = e.stack_id();
    p.stream = e.stream();
    p.event_index = index_;
    pieces_.emplace(start, p);
    const char* layer = kind == PieceKind::kPool ? "stream-ordered pool" : frames_.layer(p.stack_id);
    entry(action, start, size, p.stream, p.stack_id, segment_label(p.api, layer));
  }

  // Whether [start, end) of `kind` would lie right next to a live piece on the same stream where one of the two is
  // a mapping and the other not (`next`: the first piece at or after `start`). The page merges a mapping with the
  // segments beside it on its stream when it replays an unmap backwards, and a cudaMalloc segment merged so can no
  // longer be found by its address: such a pair is never made.
  bool touches_other_kind(std::map<uint64_t, Piece>::iterator next, uint64_t start, uint64_t end, PieceKind kind,
                          uint64_t stream) const {
    auto mixed = [&](const Piece& p) {
      return p.stream == stream && (p.kind == PieceKind::kMapped) != (kind == PieceKind::kMapped);
    };
    if (next != pieces_.end() && next->first == end && mixed(next->second)) return true;
    return next != pieces_.begin() && std::prev(next)->second.end == start && mixed(std::prev(next)->second);
  }

  // The segment (or mapping) at `it` is gone: its live blocks are freed first, then it is written as `action`.
  void release(std::map<uint64_t, Piece>::iterator it, const char* action) {
    uint64_t start = it->first;
    Piece p = it->second;
    auto b = blocks_.lower_bound(start);
    if (b != blocks_.begin() && std::prev(b)->first + std::prev(b)->second.size_bytes > start) --b;
    while (b != blocks_.end() && b->first < p.end) {
      ++counts_.blocks_freed_with_segment;
      b = free_block(b, b->second.stack_id);
    }
    pieces_.erase(it);
    entry(action, start, p.end - start, p.stream, p.stack_id, segment_label(p.api, piece_layer(p)));
  }

  const char* piece_layer(const Piece& p) const {
    if (p.kind == PieceKind::kPool) return "stream-ordered pool";
    return p.held_block ? allocating_layer_name(AllocatingLayer::kPyTorchAllocator) : frames_.layer(p.stack_id);
  }

  void on_block_alloc(const EventFields& e) {
    uint64_t start = e.address(), size = e.size(), end = start + size;
    if (size == 0 || end < start) {
      ++counts_.blocks_outside_segments;
      return;
    }
    if (auto same = blocks_.find(start); same != blocks_.end()) {
      ++counts_.blocks_allocated_again;
      free_block(same, same->second.stack_id);
    }
    auto next = blocks_.lower_bound(start);
    if ((next != blocks_.end() && next->first < end) ||
        (next != blocks_.begin() && std::prev(next)->first + std::prev(next)->second.size_bytes > start)) {
      ++counts_.blocks_overlapping;
      return;
    }
    if (!covered(start, end)) {
      ++counts_.blocks_outside_segments;
      return;
    }
    blocks_.emplace(start, LiveBlock{size, e.stack_id(), e.stream()});
    entry("alloc", start, size, e.stream(), e.stack_id(), "");
  }

  // Whether [start, end) lies in one driver segment or pool block (PyTorch's cudaMallocAsync backend places each
  // of its blocks in one), or in one run of adjacent mappings on one stream; marks the pieces as PyTorch's.
  bool covered(uint64_t start, uint64_t end) {
    auto it = pieces_.upper_bound(start);
    if (it == pieces_.begin()) return false;
    --it;
    if (it->second.end <= start) return false;
    if (it->second.kind != PieceKind::kMapped) {
      if (it->second.end < end) return false;
      it->second.held_block = true;
      return true;
    }
    auto first = it;
    uint64_t stream = it->second.stream;
    while (it->second.end < end) {
      auto next = std::next(it);
      if (next == pieces_.end() || next->first != it->second.end || next->second.kind != PieceKind::kMapped ||
          next->second.stream != stream)
        return false;
      it = next;
    }
    for (auto p = first;; ++p) {
      p->second.held_block = true;
      if (p == it) break;
    }
    return true;
  }

  void on_block_free(const EventFields& e) {
    auto it = blocks_.find(e.address());
    if (it == blocks_.end()) {
      ++counts_.frees_of_unknown_blocks;
      return;
    }
    free_block(it, e.stack_id() ? e.stack_id() : it->second.stack_id);
  }

  // free_requested then free_completed, as PyTorch's allocator records a free no other stream holds up (the page
  // shows the pair as one free).
  std::map<uint64_t, LiveBlock>::iterator free_block(std::map<uint64_t, LiveBlock>::iterator it, uint64_t stack_id) {
    entry("free_requested", it->first, it->second.size_bytes, it->second.stream, stack_id, "");
    entry("free_completed", it->first, it->second.size_bytes, it->second.stream, stack_id, "");
    return blocks_.erase(it);
  }

  void write_segment(uint64_t start, uint64_t end, const Piece& first, bool held) const {
    uint64_t active = 0;
    for (auto b = blocks_.lower_bound(start); b != blocks_.end() && b->first < end; ++b) active += b->second.size_bytes;
    w_.begin_dict();
    w_.key("device");
    w_.integer(device_);
    w_.key("address");
    w_.unsigned_integer(start);
    w_.key("total_size");
    w_.unsigned_integer(end - start);
    for (const char* key : {"allocated_size", "active_size", "requested_size"}) {
      w_.key(key);
      w_.unsigned_integer(active);
    }
    w_.key("stream");
    w_.unsigned_integer(first.stream);
    w_.key("segment_type");
    if (!held || first.kind == PieceKind::kPool) w_.string(piece_layer(first));
    else w_.string(first.kind == PieceKind::kDriver && end - start == kSmallSegmentBytes ? "small" : "large");
    w_.key("segment_pool_id");
    w_.begin_tuple();
    w_.integer(0);
    w_.integer(0);
    w_.end_tuple();
    w_.key("is_expandable");
    w_.boolean(first.kind == PieceKind::kMapped);
    w_.key("frames");
    Piece labelled = first;
    labelled.held_block = held;
    frames_.write(first.stack_id, segment_label(first.api, piece_layer(labelled)));
    w_.key("blocks");
    write_blocks(start, end);
    w_.end_dict();
  }

  // The blocks tiling [start, end): live blocks and the gaps between them, in address order.
  void write_blocks(uint64_t start, uint64_t end) const {
    w_.begin_list();
    uint64_t cursor = start;
    for (auto b = blocks_.lower_bound(start); b != blocks_.end() && b->first < end; ++b) {
      if (b->first > cursor) block(cursor, b->first - cursor, nullptr);
      block(b->first, b->second.size_bytes, &b->second);
      cursor = b->first + b->second.size_bytes;
    }
    if (cursor < end) block(cursor, end - cursor, nullptr);
    w_.end_list();
  }

  // One block: a live one (`live`), or a gap (inactive, no frames).
  void block(uint64_t address, uint64_t size, const LiveBlock* live) const {
    w_.begin_dict();
    w_.key("address");
    w_.unsigned_integer(address);
    w_.key("size");
    w_.unsigned_integer(size);
    w_.key("requested_size");
    w_.unsigned_integer(live ? size : 0);
    w_.key("state");
    w_.string(live ? "active_allocated" : "inactive");
    w_.key("frames");
    if (live) {
      frames_.write(live->stack_id, "");
    } else {
      w_.begin_list();
      w_.end_list();
    }
    w_.end_dict();
  }

  int32_t device_;
  const MemoryModel* model_ = nullptr;  // during replay()
  ValueWriter& w_;
  FrameLists& frames_;
  uint64_t start_unix_ns_;
  Counts& counts_;
  uint64_t index_ = 0;
  bool ended_at_finalizing_ = false;
  uint64_t end_time_us_ = 0;
  std::map<uint64_t, Piece> pieces_;      // live segments and mappings by start; never overlapping
  std::map<uint64_t, LiveBlock> blocks_;  // live PyTorch blocks by address; never overlapping, each inside pieces_
};

void write_counts(ValueWriter& w, const Counts& c, bool at_finalizing, uint64_t end_time_us) {
  w.begin_dict();
  w.key("ends_at");
  w.string(at_finalizing ? "python_finalizing" : "end_of_trace");
  w.key("ends_at_time_us");
  w.unsigned_integer(end_time_us);
  const std::pair<const char*, uint64_t> counts[] = {
      {"blocks_outside_segments", c.blocks_outside_segments},     {"blocks_overlapping", c.blocks_overlapping},
      {"frees_of_unknown_blocks", c.frees_of_unknown_blocks},     {"blocks_allocated_again", c.blocks_allocated_again},
      {"blocks_freed_with_segment", c.blocks_freed_with_segment}, {"segments_overlapping", c.segments_overlapping},
      {"segments_next_to_mappings", c.segments_next_to_mappings},
  };
  for (const auto& [name, value] : counts) {
    w.key(name);
    w.unsigned_integer(value);
  }
  w.end_dict();
}

// Whether `device` has anything to write: an allocation or a failed one (the first pass saw it). Other devices (one
// only sampled by NVML, say) get an empty list without a pass over the trace.
bool has_entries(const Analysis& analysis, int32_t device) {
  auto it = analysis.model.devices().find(device);
  if (it != analysis.model.devices().end() && it->second.driver_allocations + it->second.block_allocations > 0)
    return true;
  // Allocations live at attach are not among the trace's own (DeviceState's counts), and are entries too.
  if (auto facts = analysis.model.attach_facts().find(device); facts != analysis.model.attach_facts().end())
    if (facts->second.block_allocations + facts->second.driver_allocations > 0) return true;
  for (const OomEvent& oom : analysis.model.ooms())
    if (oom.device == device) return true;
  return analysis.model.health().ooms_not_listed > 0 && it != analysis.model.devices().end();
}

void write_snapshot(const ExportSource& source, ValueWriter& w) {
  const Analysis& analysis = source.analysis();
  uint64_t start_unix_ns = analysis.info.start ? analysis.info.start->start_unix_ns() : 0;
  int32_t max_device = -1;
  for (const auto& [device, state] : analysis.model.devices())
    if (valid_device_ordinal(device) && device > max_device) max_device = device;

  FrameLists frames(source.resolver(), w);
  Counts counts;
  // One replay per device; each device's live segments and blocks are kept until `segments` is written.
  std::vector<std::unique_ptr<DeviceTrace>> devices;
  bool at_finalizing = false;
  uint64_t end_time_us = start_unix_ns / 1000;
  w.begin_dict();
  w.key("device_traces");
  w.begin_list();
  for (int32_t device = 0; device <= max_device; ++device) {
    w.begin_list();
    if (has_entries(analysis, device)) {
      devices.push_back(std::make_unique<DeviceTrace>(device, w, frames, start_unix_ns, counts));
      devices.back()->replay(source.path());
      at_finalizing = devices.back()->ended_at_finalizing();
      end_time_us = devices.back()->end_time_us();
    }
    w.end_list();
  }
  w.end_list();
  w.key("segments");
  w.begin_list();
  for (const auto& device : devices) device->write_segments();
  w.end_list();
  w.key("memtrace");
  write_counts(w, counts, at_finalizing, end_time_us);
  w.end_dict();
  w.finish();
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void write_memory_viz_as(const ExportSource& source, std::ostream& out, bool json) {
  if (json) {
    JsonWriter w(out);
    write_snapshot(source, w);
  } else {
    PickleWriter w(out);
    write_snapshot(source, w);
  }
}

void write_memory_viz(const ExportSource& source, std::ostream& out) {
  write_memory_viz_as(source, out, ends_with(source.output_path(), ".json"));
}

}  // namespace memtrace
