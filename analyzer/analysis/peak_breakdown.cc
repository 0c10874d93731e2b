#include "analysis/peak_breakdown.h"

#include <algorithm>
#include <unordered_map>

#include "model/replay.h"
#include "stacks/frame_roles.h"

namespace memtrace {

const char* breakdown_row_name(BreakdownRow row) {
  switch (row) {
    case BreakdownRow::kParameters: return "parameters";
    case BreakdownRow::kGradients: return "gradients";
    case BreakdownRow::kOptimizerState: return "optimizer state";
    case BreakdownRow::kActivations: return "activations";
    case BreakdownRow::kTemporaries: return "temporaries";
    case BreakdownRow::kWorkspaces: return "library workspaces";
    case BreakdownRow::kUnclassified: return "unclassified";
  }
  return "unclassified";
}

const char* breakdown_row_key(BreakdownRow row) {
  switch (row) {
    case BreakdownRow::kOptimizerState: return "optimizer_state";
    case BreakdownRow::kWorkspaces: return "library_workspaces";
    default: return breakdown_row_name(row);
  }
}

void ByteCount::add(uint64_t size_bytes) {
  bytes = saturating_add(bytes, size_bytes);
  ++count;
}

uint64_t MomentBreakdown::outside_bytes() const {
  uint64_t sum = 0;
  for (const ByteCount& c : outside) sum = saturating_add(sum, c.bytes);
  return sum;
}

ByteCount MomentBreakdown::unsymbolized_total() const {
  ByteCount sum;
  for (const ByteCount& c : unsymbolized) {
    sum.bytes = saturating_add(sum.bytes, c.bytes);
    sum.count = saturating_add(sum.count, c.count);
  }
  return sum;
}

namespace {

bool phases_cover(const EventPhases& phases, uint64_t event) {
  return phases.source != IterationSource::kNone && !phases.iterations.empty() &&
         event < phases.phase_of_event.size() && event < phases.iteration_of_event.size();
}

// An allocation made outside every iteration: parameters when made before the first and live to the end of the
// last.
Placement place_outside(uint64_t allocated_event, std::optional<uint64_t> freed_event, const EventPhases& phases) {
  const bool before_first = allocated_event < phases.iterations.front().first_event;
  const bool live_throughout = !freed_event || *freed_event >= phases.iterations.back().end_event;
  return {before_first && live_throughout ? BreakdownRow::kParameters : BreakdownRow::kUnclassified, false};
}

}  // namespace

Placement place_allocation(uint64_t allocated_event, std::optional<uint64_t> freed_event, const EventPhases& phases) {
  if (!phases_cover(phases, allocated_event)) return {};
  const int32_t iteration = phases.iteration_of_event[allocated_event];
  if (iteration < 0 || size_t(iteration) >= phases.iterations.size())
    return place_outside(allocated_event, freed_event, phases);
  const bool kept = !freed_event || *freed_event >= phases.iterations[size_t(iteration)].end_event;
  switch (phases.phase_of_event[allocated_event]) {
    case Phase::kBackward: return {kept ? BreakdownRow::kGradients : BreakdownRow::kTemporaries, false};
    case Phase::kOptimizer: return {kept ? BreakdownRow::kOptimizerState : BreakdownRow::kTemporaries, false};
    case Phase::kForward: {
      if (kept) return {BreakdownRow::kActivations, true};
      const bool freed_in_backward =
          phases_cover(phases, *freed_event) && phases.phase_of_event[*freed_event] == Phase::kBackward;
      return {freed_in_backward ? BreakdownRow::kActivations : BreakdownRow::kTemporaries, false};
    }
    case Phase::kOther:
    case Phase::kOutside: return {kept ? BreakdownRow::kUnclassified : BreakdownRow::kTemporaries, false};
  }
  return {};
}

bool is_library_workspace(const ResolvedStack& stack) {
  for (const Frame& f : stack.frames) {
    if (f.python) continue;
    const std::string_view name = f.function;
    const bool pytorch_cuda = name.starts_with("at::cuda::") || name.starts_with("at::native::");
    if (!pytorch_cuda) continue;
    // The namespace's own name is the function's up to its argument list: "at::cuda::getCUDABlasLtWorkspace()".
    const std::string_view head = name.substr(0, name.find('('));
    if (head.find("Workspace") != std::string_view::npos) return true;
  }
  return false;
}

bool pytorch_frames_unsymbolized(const ResolvedStack& stack) {
  size_t pytorch = 0, named = 0;
  for (const Frame& f : stack.frames) {
    if (f.python || f.in_python_interpreter || f.module.empty()) continue;
    if (f.build_id_mismatch) return true;
    if (!f.module.starts_with("libtorch") && !f.module.starts_with("libc10")) continue;
    ++pytorch;
    // FrameResolver names a frame the symbolizer could not by its module and offset ("libtorch_cuda.so+0x3a4b238").
    if (f.function != f.module + "+" + hex(f.module_offset)) ++named;
  }
  return pytorch > 0 && named == 0;
}

namespace {

// Resolves each stack once: the workspace rule and the allocating layer read its frames.
class StackFacts {
 public:
  explicit StackFacts(FrameResolver& resolver) : resolver_(resolver) {}
  struct Facts {
    bool workspace = false;
    bool unsymbolized = false;  // pytorch_frames_unsymbolized
    AllocatingLayer layer = AllocatingLayer::kOther;
  };
  const Facts& of(uint64_t stack_id) {
    auto [it, inserted] = facts_.try_emplace(stack_id);
    if (inserted) {
      ResolvedStack stack = resolver_.resolve(stack_id);
      it->second = Facts{is_library_workspace(stack), pytorch_frames_unsymbolized(stack), allocating_layer(stack)};
    }
    return it->second;
  }

 private:
  FrameResolver& resolver_;
  std::unordered_map<uint64_t, Facts> facts_;
};

// A driver-layer allocation of `device` that is not one of PyTorch's segments.
bool outside_pytorch(const LiveAllocation& a, int32_t device, StackFacts& facts) {
  if (a.device != device || is_block_space(a.space) || !a.charged_to_device() || a.held_blocks) return false;
  return facts.of(a.stack_id).layer != AllocatingLayer::kPyTorchAllocator;
}

size_t outside_index(AllocatingLayer layer) {
  for (size_t i = 0; i < kOutsideLayers.size(); ++i)
    if (kOutsideLayers[i] == layer) return i;
  return kOutsideLayers.size() - 1;  // kOther
}

// The replay's observer: snapshots each moment, then follows the frees of what it snapshotted and the device
// usage samples each moment still waits for.
class BreakdownObserver {
 public:
  BreakdownObserver(const MemoryModel& model, std::span<const Moment> moments, bool follow_frees,
                    std::vector<MomentBreakdown>& out, StackFacts& facts)
      : model_(model), follow_frees_(follow_frees), out_(out), facts_(facts), cursor_(replay_moments(moments)) {
    out_.resize(moments.size());
    for (size_t i = 0; i < moments.size(); ++i) {
      out_[i].device = moments[i].device;
      out_[i].event_index = moments[i].event_index;
    }
  }

  // A moment at attach (a peak the live set at attach reached) is the state before the event it names.
  void before_event(const EventFields&) {
    cursor_.before_event(model_.next_event_index(), [&](size_t m) { snapshot(out_[m]); });
  }

  ReplayStep after_event(const EventFields& event) {
    const uint64_t index = model_.next_event_index() - 1;
    if (follow_frees_ && !followed_.empty()) note_frees(event, index);
    if (event.kind() == proto::DEVICE_USAGE && !waiting_usage_.empty()) note_usage(event.device());
    cursor_.after_event(index, [&](size_t m) { snapshot(out_[m]); });
    return cursor_.done() && followed_.empty() && waiting_usage_.empty() ? ReplayStep::kStop : ReplayStep::kGoOn;
  }

  // After the replay: a trace without events after its attach records (a snapshot of the live set) has its
  // moments at attach there.
  void finish() {
    cursor_.at_end(model_.next_event_index(), [&](size_t m) { snapshot(out_[m]); });
  }

 private:
  static std::vector<ReplayMoment> replay_moments(std::span<const Moment> moments) {
    std::vector<ReplayMoment> out;
    for (const Moment& m : moments) out.push_back(ReplayMoment{m.event_index, m.at_attach});
    return out;
  }

  struct Followed {
    size_t breakdown;
    size_t live;  // index into that breakdown's `live`
  };

  void snapshot(MomentBreakdown& b) {
    const size_t at = size_t(&b - out_.data());
    b.time_ns = model_.now_ns();
    auto state = model_.devices().find(b.device);
    if (state == model_.devices().end()) return;
    b.totals = model_.totals(b.device);
    // The replay has the trace's layer hints: the flags are those of the whole trace from the first event.
    b.outside_applies = state->second.block_layer_seen;
    if (state->second.allocator_layer_seen && b.totals.reserved_bytes >= b.totals.allocated_bytes)
      b.cache_bytes = b.totals.reserved_bytes - b.totals.allocated_bytes;
    model_.visit_allocated(b.device, [&](const LiveAllocation& a) {
      b.live.push_back(LiveAtMoment{a, std::nullopt, {}});
      if (follow_frees_) followed_[a.address].push_back(Followed{at, b.live.size() - 1});
    });
    if (b.outside_applies)
      model_.visit_live([&](const LiveAllocation& a) {
        if (!outside_pytorch(a, b.device, facts_)) return;
        b.outside[outside_index(facts_.of(a.stack_id).layer)].add(a.size_bytes);
      });
    b.usage = model_.last_device_usage(b.device);
    if (!b.usage) waiting_usage_.push_back(at);
  }

  // Whether the followed allocation `f` is still the one live at its key.
  bool still_live(const Followed& f) const {
    const LiveAllocation& a = out_[f.breakdown].live[f.live].allocation;
    const LiveAllocation* now = model_.find_live(a.space, a.address);
    return now && now->event_index == a.event_index;
  }

  void check_key(uint64_t key, uint64_t index) {
    auto it = followed_.find(key);
    if (it == followed_.end()) return;
    std::erase_if(it->second, [&](const Followed& f) {
      if (still_live(f)) return false;
      out_[f.breakdown].live[f.live].freed_event = index;
      return true;
    });
    if (it->second.empty()) followed_.erase(it);
  }

  // After `event` (of index `index`): the followed allocations it ended. A free, an allocation at a live address
  // and an unmap end what is at their address or handle; a context destroy or a graph launch may end anything.
  void note_frees(const EventFields& event, uint64_t index) {
    const proto::EventKind kind = event.kind();
    if (kind == proto::CONTEXT_DESTROY || kind == proto::GRAPH_LAUNCH) {
      std::vector<uint64_t> keys;
      for (const auto& [key, list] : followed_) keys.push_back(key);
      for (uint64_t key : keys) check_key(key, index);
      return;
    }
    if (kind != proto::FREE && kind != proto::ALLOC && kind != proto::UNMAP) return;
    check_key(event.address(), index);
    if (event.handle() != event.address()) check_key(event.handle(), index);
  }

  void note_usage(int32_t device) {
    std::erase_if(waiting_usage_, [&](size_t at) {
      if (out_[at].device != device) return false;
      out_[at].usage = model_.last_device_usage(device);
      return out_[at].usage.has_value();
    });
  }

  const MemoryModel& model_;
  const bool follow_frees_;
  std::vector<MomentBreakdown>& out_;
  StackFacts& facts_;
  MomentCursor cursor_;                                           // over the moments, whose indices are out_'s
  std::unordered_map<uint64_t, std::vector<Followed>> followed_;  // by address (or handle), not yet freed
  std::vector<size_t> waiting_usage_;                             // into out_
};

// The part of the allocated total no live allocation accounts for, as unclassified bytes (no allocation to count):
// on a device without a block layer allocated is the driver total, which holds what its stream-ordered pools
// reserve (POOL_RESERVED samples) beside the allocations. So that the rows add up to allocated.
void add_unlisted_to_unclassified(MomentBreakdown& b) {
  uint64_t listed = 0;
  for (const ByteCount& row : b.rows) listed = saturating_add(listed, row.bytes);
  if (b.totals.allocated_bytes > listed) {
    ByteCount& unclassified = b.rows[size_t(BreakdownRow::kUnclassified)];
    unclassified.bytes = saturating_add(unclassified.bytes, b.totals.allocated_bytes - listed);
  }
}

void place_live(MomentBreakdown& b, const EventPhases& phases, StackFacts& facts) {
  b.phases_source = phases.source;
  if (phases_cover(phases, b.event_index)) {
    b.iteration = phases.iteration_of_event[b.event_index];
    b.phase = phases.phase_of_event[b.event_index];
  }
  b.training_seen = phases.source != IterationSource::kNone &&
                    std::any_of(phases.phase_of_event.begin(), phases.phase_of_event.end(),
                                [](Phase p) { return p == Phase::kBackward || p == Phase::kOptimizer; });
  for (LiveAtMoment& l : b.live) {
    const StackFacts::Facts& f = facts.of(l.allocation.stack_id);
    l.placement = f.workspace ? Placement{BreakdownRow::kWorkspaces, false}
                              : place_allocation(l.allocation.event_index, l.freed_event, phases);
    b.rows[size_t(l.placement.row)].add(l.allocation.size_bytes);
    if (!f.workspace && f.unsymbolized) b.unsymbolized[size_t(l.placement.row)].add(l.allocation.size_bytes);
    if (l.placement.kept_across_iterations) b.activations_kept.add(l.allocation.size_bytes);
  }
  add_unlisted_to_unclassified(b);
}

}  // namespace

std::vector<MomentBreakdown> break_down_moments(const Analysis& analysis, std::span<const Moment> moments,
                                                const EventPhases& phases, FrameResolver& resolver) {
  std::vector<MomentBreakdown> out;
  StackFacts facts(resolver);
  MemoryModel model;
  const bool follow_frees = phases.source != IterationSource::kNone;
  BreakdownObserver observer(model, moments, follow_frees, out, facts);
  if (!moments.empty()) {
    replay_trace(analysis.path, analysis.model.layer_hints(), model, observer);
    observer.finish();
  }
  for (MomentBreakdown& b : out) place_live(b, phases, facts);
  return out;
}

MomentBreakdown break_down_captured_peak(const Analysis& analysis, int32_t device, FrameResolver& resolver) {
  MomentBreakdown b;
  b.device = device;
  auto state = analysis.model.devices().find(device);
  auto sites = analysis.live_at_peak.find(device);
  if (state == analysis.model.devices().end() || sites == analysis.live_at_peak.end()) return b;
  const DeviceState& d = state->second;
  b.event_index = d.peak_allocated().event_index;
  b.time_ns = d.peak_allocated().time_ns;
  b.totals.allocated_bytes = d.peak_allocated().bytes;
  StackFacts facts(resolver);
  for (const CallSite& site : sites->second) {
    const StackFacts::Facts& f = facts.of(site.stack_id);
    const size_t r = size_t(f.workspace ? BreakdownRow::kWorkspaces : BreakdownRow::kUnclassified);
    for (ByteCount* c : {&b.rows[r], f.workspace || !f.unsymbolized ? nullptr : &b.unsymbolized[r]}) {
      if (!c) continue;
      c->bytes = saturating_add(c->bytes, site.bytes);
      c->count = saturating_add(c->count, site.count);
    }
  }
  add_unlisted_to_unclassified(b);
  if (auto f = analysis.fragmentation_at_peak.find(device); f != analysis.fragmentation_at_peak.end()) {
    b.totals.reserved_bytes = saturating_add(b.totals.allocated_bytes, f->second.reserved_minus_allocated_bytes);
    if (d.allocator_layer_seen) b.cache_bytes = f->second.reserved_minus_allocated_bytes;
  }
  b.outside_applies = d.block_layer_seen;
  if (auto outside = analysis.outside_at_peak.find(device); b.outside_applies && outside != analysis.outside_at_peak.end())
    for (const CallSite& site : outside->second) {
      if (facts.of(site.stack_id).layer == AllocatingLayer::kPyTorchAllocator) continue;  // a segment with no block yet
      ByteCount& layer = b.outside[outside_index(facts.of(site.stack_id).layer)];
      layer.bytes = saturating_add(layer.bytes, site.bytes);
      layer.count = saturating_add(layer.count, site.count);
    }
  b.usage = d.peak_usage;
  return b;
}

namespace {

class TimeObserver {
 public:
  TimeObserver(const MemoryModel& model, int64_t time_ns) : model_(model), time_ns_(time_ns) {}
  ReplayStep after_event(const EventFields&) {
    if (model_.next_event_index() == 1) found_.first_event_ns = model_.now_ns();
    if (model_.now_ns() > time_ns_) return ReplayStep::kStop;
    found_.event = model_.next_event_index() - 1;
    return ReplayStep::kGoOn;
  }
  const EventAtTime& found() const { return found_; }

 private:
  const MemoryModel& model_;
  int64_t time_ns_;
  EventAtTime found_;
};

}  // namespace

EventAtTime last_event_at_or_before(const Analysis& analysis, int64_t time_ns) {
  MemoryModel model;
  TimeObserver observer(model, time_ns);
  replay_trace(analysis.path, analysis.model.layer_hints(), model, observer);
  return observer.found();
}

uint64_t dominance_share_bytes(const MomentBreakdown& b, PeakDominance dominance, bool with_unsymbolized) {
  auto row_bytes = [&](BreakdownRow r) {
    const uint64_t all = b.row(r).bytes, unsymbolized = b.unsymbolized[size_t(r)].bytes;
    return with_unsymbolized || unsymbolized > all ? all : all - unsymbolized;
  };
  switch (dominance) {
    case PeakDominance::kActivations: return row_bytes(BreakdownRow::kActivations);
    case PeakDominance::kModelState:
      return saturating_add(saturating_add(row_bytes(BreakdownRow::kParameters), row_bytes(BreakdownRow::kGradients)),
                            row_bytes(BreakdownRow::kOptimizerState));
    case PeakDominance::kNone: break;
  }
  return 0;
}

namespace {

// The verdict of the rows, counting the blocks not symbolized or not.
PeakDominance dominance_of(const MomentBreakdown& b, bool with_unsymbolized) {
  if (b.phases_source == IterationSource::kNone || b.totals.allocated_bytes == 0) return PeakDominance::kNone;
  // share > kDominantSharePercent %, in integers: bytes * 100 > allocated * percent (128-bit: no overflow).
  auto dominates = [&](PeakDominance d) {
    using Wide = unsigned __int128;
    return Wide(dominance_share_bytes(b, d, with_unsymbolized)) * 100 >
           Wide(b.totals.allocated_bytes) * kDominantSharePercent;
  };
  if (dominates(PeakDominance::kActivations)) return PeakDominance::kActivations;
  if (dominates(PeakDominance::kModelState)) return PeakDominance::kModelState;
  return PeakDominance::kNone;
}

}  // namespace

PeakDominance peak_dominance(const MomentBreakdown& b) { return dominance_of(b, false); }

PeakDominance uncertain_dominance(const MomentBreakdown& b) {
  return peak_dominance(b) == PeakDominance::kNone ? dominance_of(b, true) : PeakDominance::kNone;
}

std::map<int32_t, MomentBreakdown> breakdowns_at_peaks(const Analysis& analysis, const EventPhases& phases,
                                                       FrameResolver& resolver) {
  std::vector<Moment> moments;
  for (const auto& [device, state] : analysis.model.devices())
    if (state.peak_allocated().bytes > 0) moments.push_back(moment_of_peak(device, state.peak_allocated()));
  std::map<int32_t, MomentBreakdown> by_device;
  if (phases.source == IterationSource::kNone) {
    for (const Moment& m : moments) by_device[m.device] = break_down_captured_peak(analysis, m.device, resolver);
    return by_device;
  }
  for (MomentBreakdown& b : break_down_moments(analysis, moments, phases, resolver)) by_device[b.device] = std::move(b);
  return by_device;
}

}  // namespace memtrace
