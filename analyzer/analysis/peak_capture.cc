#include "analysis/peak_capture.h"

#include <algorithm>

namespace memtrace {

void PeakCapture::settle_pending(const EventFields& event) {
  expecting_raise_ = false;
  std::erase_if(pending_, [&](Pending& p) {
    p.expect_raise = model_.raises_peak_allocated(event, p.device);
    expecting_raise_ = expecting_raise_ || p.expect_raise;
    if (p.expect_raise) return false;
    capture(p);
    return true;
  });
  if (gave_up_) {
    pending_.clear();
    expecting_raise_ = false;
  }
  has_pending_ = !pending_.empty();
}

void PeakCapture::after_applied() {
  if (gave_up_) return;
  uint64_t last = model_.next_event_index() - 1;
  if (expecting_raise_) drop_unraised(last);
  if (!model_.allocated_peak_raised()) return;  // no device's peak is at this event
  for (const DeviceState* state : model_.devices_touched()) {
    const Peak& peak = state->block_layer_seen ? state->peak_blocks : state->peak_driver;  // peak_allocated()
    if (!peak.at_attach && peak.event_index == last && peak.bytes > 0)
      note_peak(state->device, ReplayMoment{last, false});
  }
}

void PeakCapture::drop_unraised(uint64_t last) {
  // A predicted raise that did not happen leaves no snapshot of that peak: the replay finds it, if it
  // stays the device's peak.
  std::erase_if(pending_, [&](const Pending& p) {
    return p.expect_raise && model_.devices().at(p.device).peak_allocated().event_index != last;
  });
  expecting_raise_ = false;
  has_pending_ = !pending_.empty();
}

void PeakCapture::note_peak(int32_t device, ReplayMoment moment) {
  for (Pending& p : pending_) {
    if (p.device != device) continue;
    p = Pending{device, moment, false};
    return;
  }
  pending_.push_back(Pending{device, moment, false});
  has_pending_ = true;
}

void PeakCapture::capture(const Pending& pending) {
  if (gave_up_) return;
  walked_ += model_.live_allocations();
  if (walked_ > kBudgetSlack + kWalksPerEvent * model_.next_event_index()) {
    gave_up_ = true;  // the callers drop pending_
    snapshots_.clear();
    return;
  }
  Snapshot& s = snapshots_[pending.device];
  s.moment = pending.moment;
  by_stack_.clear();
  s.outside.clear();
  const DeviceState& state = model_.devices().at(pending.device);
  // One walk of every live allocation (visit_allocated walks them all too, and filters).
  model_.visit_live([&](const LiveAllocation& a) {
    if (state.counts_as_allocated(a)) {
      SiteTotals& site = *by_stack_.try_emplace(a.stack_id, SiteTotals{}).first;
      site.bytes = saturating_add(site.bytes, a.size_bytes);
      ++site.count;
    } else if (is_outside_candidate(state, a)) {
      // Few: a process holds a handful of driver allocations outside PyTorch's segments.
      auto same = std::find_if(s.outside.begin(), s.outside.end(),
                               [&](const CallSite& c) { return c.stack_id == a.stack_id; });
      if (same == s.outside.end()) same = s.outside.insert(same, CallSite{pending.device, a.stack_id, 0, 0});
      same->bytes = saturating_add(same->bytes, a.size_bytes);
      ++same->count;
    }
  });
  s.sites.clear();
  by_stack_.for_each([&](uint64_t stack_id, const SiteTotals& site) {
    s.sites.push_back(CallSite{pending.device, stack_id, site.bytes, site.count});
  });
  LayerHint layers = state.layers();
  s.with_allocator_layer = model_.fragmentation(pending.device, LayerHint{layers.block_layer, true});
  s.without_allocator_layer = model_.fragmentation(pending.device, LayerHint{layers.block_layer, false});
}

std::vector<int32_t> PeakCapture::finish(std::map<int32_t, std::vector<CallSite>>& live_at_peak,
                                         std::map<int32_t, Fragmentation>& fragmentation_at_peak,
                                         std::map<int32_t, std::vector<CallSite>>* outside_at_peak) {
  // Nothing has been applied since a pending peak: the state is still the peak's.
  for (const Pending& p : pending_) capture(p);
  pending_.clear();
  has_pending_ = false;
  std::vector<int32_t> missing;
  for (const auto& [device, state] : model_.devices()) {
    Peak peak = state.peak_allocated();
    if (peak.bytes == 0) continue;
    auto s = snapshots_.find(device);
    if (gave_up_ || s == snapshots_.end() || s->second.moment != ReplayMoment::of(peak)) {
      missing.push_back(device);
      continue;
    }
    sort_largest_first(s->second.sites);
    live_at_peak[device] = std::move(s->second.sites);
    if (outside_at_peak) (*outside_at_peak)[device] = std::move(s->second.outside);
    fragmentation_at_peak[device] =
        state.allocator_layer_seen ? s->second.with_allocator_layer : s->second.without_allocator_layer;
  }
  snapshots_.clear();
  return missing;
}

}  // namespace memtrace
