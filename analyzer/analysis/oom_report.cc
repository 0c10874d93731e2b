#include "analysis/oom_report.h"

#include <algorithm>
#include <memory>

#include "model/replay.h"

namespace memtrace {
namespace {

// Identity of a listed OOM: the same event seen by two replays of one file.
bool same_oom(const OomEvent& a, const OomEvent& b) {
  return a.time_ns == b.time_ns && a.tid == b.tid && a.api == b.api && a.layer == b.layer &&
         a.requested_bytes == b.requested_bytes && a.device == b.device && a.driver_attempts == b.driver_attempts;
}

// Replays the events (a replay_trace observer) and snapshots the model at each OOM it lists. The model
// folds a thread's failed driver allocations into the PyTorch OOM that follows them by erasing their
// entries; `tracked_` mirrors its list entry for entry so that their snapshots go with them.
class OomReplay {
 public:
  OomReplay(const Analysis& analysis, size_t sites_per_oom, OomSiteBudget budget)
      : first_pass_(analysis.model.ooms()),
        sites_per_oom_(sites_per_oom),
        grouping_(analysis.stacks),
        budget_(budget.slack, budget.per_event, analysis.model.next_event_index()) {
    wanted_ = std::min(first_pass_.size(), kMaxOomsDetailed);
  }

  // Replays `analysis`'s trace with the first pass's layer hints until every detailed OOM is complete.
  void run(const Analysis& analysis) { replay_trace(analysis.path, analysis.model.layer_hints(), model_, *this); }

  void before_event(const EventFields&) {
    listed_before_ = model_.ooms().size();
    before_ = model_.health();
  }
  // Stops once every OOM that gets detail has been seen, with its DEVICE_USAGE sample when one followed it.
  ReplayStep after_event(const EventFields& event) {
    note_usage_sample(event);
    if (event.kind() == proto::OOM) note_oom(event);
    return found_all_ && awaiting_usage_.empty() ? ReplayStep::kStop : ReplayStep::kGoOn;
  }

  std::vector<OomDetail> take_details() {
    std::vector<OomDetail> details;
    for (Tracked& t : tracked_)
      if (t.detail && details.size() < kMaxOomsDetailed) details.push_back(std::move(*t.detail));
    return details;
  }

 private:
  struct Tracked {
    uint32_t tid = 0;
    proto::Layer layer = proto::LAYER_UNKNOWN;
    std::unique_ptr<OomDetail> detail;  // null for entries at or beyond kMaxOomsDetailed
  };
  // An OOM whose hook may still record the DEVICE_USAGE sample it takes right after the failure.
  struct AwaitingUsage {
    OomDetail* detail;
    proto::Api api;
    uint32_t tid;
  };
  // A thread goes on after its failure within a few events; this bounds the list for damaged traces.
  static constexpr size_t kMaxAwaiting = 64;

  void note_oom(const EventFields& event) {
    // An OOM of a device ordinal no CUDA device has is counted by the model, not replayed: nothing to track.
    if (model_.health().events_with_bad_device != before_.events_with_bad_device) return;
    bool appended = model_.health().ooms_not_listed == before_.ooms_not_listed;
    forget_folded(event.tid(), listed_before_ + (appended ? 1 : 0) - model_.ooms().size());
    if (appended) track_new_oom(event);
    found_all_ =
        model_.ooms().size() >= wanted_ &&
        std::equal(first_pass_.begin(), first_pass_.begin() + std::ptrdiff_t(wanted_), model_.ooms().begin(), same_oom);
  }

  // Drops the entries the model just erased: the thread's last `count` driver-level failures (the same
  // walk as MemoryModel::on_oom).
  void forget_folded(uint32_t tid, size_t count) {
    for (size_t i = tracked_.size(); i-- > 0 && count > 0;) {
      if (tracked_[i].tid != tid || tracked_[i].layer != proto::LAYER_DRIVER) continue;
      if (OomDetail* gone = tracked_[i].detail.get())
        std::erase_if(awaiting_usage_, [gone](const AwaitingUsage& a) { return a.detail == gone; });
      tracked_.erase(tracked_.begin() + std::ptrdiff_t(i));
      --count;
    }
  }

  void track_new_oom(const EventFields& event) {
    // A new failure of the thread ends the wait for the sample of its previous one.
    std::erase_if(awaiting_usage_, [&](const AwaitingUsage& a) { return a.tid == event.tid(); });
    Tracked t{event.tid(), model_.ooms().back().layer, nullptr};
    if (tracked_.size() < kMaxOomsDetailed) {
      t.detail = std::make_unique<OomDetail>(snapshot(model_.ooms().back()));
      if (awaiting_usage_.size() == kMaxAwaiting) awaiting_usage_.erase(awaiting_usage_.begin());
      awaiting_usage_.push_back({t.detail.get(), event.api(), event.tid()});
    }
    tracked_.push_back(std::move(t));
  }

  OomDetail snapshot(const OomEvent& oom) {
    OomDetail d;
    d.oom = oom;
    if (auto it = model_.devices().find(oom.device); it != model_.devices().end()) {
      d.totals = it->second.totals();
      d.allocator_layer = it->second.allocator_layer_seen;
    }
    d.usage = model_.last_device_usage(oom.device);
    d.fragmentation = model_.fragmentation(oom.device);
    // The walk visits every live allocation, of any kind and device. Once one walk is refused, every
    // later OOM goes without, so that the OOMs with call sites are the first ones.
    if (!budget_.take(model_.live_allocations())) {
      d.call_sites_listed = false;
      return d;
    }
    std::vector<LiveAllocation> live;
    model_.for_each_allocated(oom.device, [&](const LiveAllocation& a) { live.push_back(a); });
    std::vector<CallSite> sites = group_by_call_site(live, grouping_);
    d.live_site_count = sites.size();
    sites.resize(std::min(sites.size(), sites_per_oom_));
    d.top_live_sites = std::move(sites);
    // find_leak_sites puts growing sites first.
    for (LeakSite& site : find_leak_sites(live, oom.time_ns, model_.first_allocation_ns(live), grouping_)) {
      if (!site.growing) break;
      if (d.growing_site_count++ < sites_per_oom_) d.growing_sites.push_back(std::move(site));
    }
    return d;
  }

  // The sample an OOM's hook takes right after the failure has the OOM's api and device; once the
  // thread records anything else, no such sample is coming.
  void note_usage_sample(const EventFields& event) {
    std::erase_if(awaiting_usage_, [&](const AwaitingUsage& a) {
      bool sample = event.kind() == proto::DEVICE_USAGE;
      if (sample && event.api() == a.api && event.device() == a.detail->oom.device) {
        a.detail->usage = model_.last_device_usage(event.device());
        a.detail->usage_after_oom = true;
        return true;
      }
      return !sample && event.tid() == a.tid;
    });
  }

  const std::vector<OomEvent>& first_pass_;
  size_t sites_per_oom_;
  SiteGrouping grouping_;  // of the first pass's stacks: the sites of every snapshot, each stack grouped once
  WalkBudget budget_;      // the OomSiteBudget
  size_t wanted_ = 0;
  bool found_all_ = false;
  MemoryModel model_;
  size_t listed_before_ = 0;      // model_.ooms().size() before the event being applied
  TraceHealth before_;            // model_.health() before it
  std::vector<Tracked> tracked_;  // one per entry of model_.ooms()
  std::vector<AwaitingUsage> awaiting_usage_;
};

}  // namespace

uint64_t OomDetail::device_total_bytes() const {
  if (oom.device_total_bytes) return oom.device_total_bytes;
  return usage ? usage->device_total_bytes : 0;
}

size_t OomReport::first_without_call_sites() const {
  size_t i = 0;
  while (i < detailed.size() && detailed[i].call_sites_listed) ++i;
  return i;
}

OomReport build_oom_report(const Analysis& analysis, size_t sites_per_oom, OomSiteBudget budget) {
  OomReport report;
  report.total = analysis.model.ooms().size() + analysis.model.health().ooms_not_listed;
  if (analysis.model.ooms().empty()) return report;
  OomReplay replay(analysis, sites_per_oom, budget);
  replay.run(analysis);
  report.detailed = replay.take_details();
  return report;
}

}  // namespace memtrace
