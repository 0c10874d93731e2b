#include "model/timeline.h"

#include <algorithm>

#include "model/replay.h"

namespace memtrace {
namespace {

// Whether to keep the fragmentation up to date at every event rather than walk it for every row:
// where the walks would visit more than kWalkedPerKeptEvent live allocations per event (a kept
// event costs about as much as a walk over that many, bench/analyzer_speed). `rows` is at most the
// rows the trace gives, `max_live` the most allocations live at once.
bool keep_fragmentation(uint64_t events, double rows, uint64_t max_live) {
  constexpr double kWalkedPerKeptEvent = 256;
  return rows * double(max_live) > kWalkedPerKeptEvent * double(events);
}

// Counts how often the interval (time_ns / interval_ns, as IntervalSampler groups rows) changes from
// one event to the next: a device's rows are at most one more than that, whatever order the times
// come in. One comparison an event; a division only when the interval changes.
class IntervalChanges {
 public:
  explicit IntervalChanges(int64_t interval_ns) : interval_ns_(interval_ns) { enter(0); }
  void note(int64_t time_ns) {
    if (time_ns >= low_ns_ && time_ns <= high_ns_) return;
    ++changes_;
    enter(time_ns);
  }
  uint64_t changes() const { return changes_; }

 private:
  // The times that share `time_ns`'s interval (division truncates towards zero: index 0 spans both signs).
  void enter(int64_t time_ns) {
    int64_t index = time_ns / interval_ns_;
    int64_t edge = index * interval_ns_;  // |edge| <= |time_ns|
    int64_t span = interval_ns_ - 1;
    if (index >= 0 && __builtin_add_overflow(edge, span, &high_ns_)) high_ns_ = INT64_MAX;
    if (index <= 0 && __builtin_sub_overflow(edge, span, &low_ns_)) low_ns_ = INT64_MIN;
    if (index > 0) low_ns_ = edge;
    if (index < 0) high_ns_ = edge;
  }
  int64_t interval_ns_;
  int64_t low_ns_ = 0, high_ns_ = 0;
  uint64_t changes_ = 0;
};

// The first pass's observer: the most allocations live at once, and the interval changes.
class PlanObserver {
 public:
  PlanObserver(const MemoryModel& model, std::optional<int64_t> interval_ns)
      : model_(model), interval_ns_(interval_ns), intervals_(interval_ns.value_or(1)) {}
  ReplayStep after_event(const EventFields&) {
    max_live_ = std::max(max_live_, model_.live_allocations());
    if (interval_ns_) intervals_.note(model_.now_ns());
    return ReplayStep::kGoOn;
  }
  size_t max_live() const { return max_live_; }
  uint64_t interval_changes() const { return intervals_.changes(); }

 private:
  const MemoryModel& model_;
  std::optional<int64_t> interval_ns_;
  size_t max_live_ = 0;
  IntervalChanges intervals_;
};

// The second pass's observer: tells the sampler the time of each event before the model applies it,
// and keeps the TraceStart's monotonic time.
class RowObserver {
 public:
  RowObserver(const MemoryModel& model, IntervalSampler& sampler) : model_(model), sampler_(sampler) {}
  void before_event(const EventFields& event) {
    int64_t next_ns;
    if (__builtin_add_overflow(model_.now_ns(), event.time_delta_ns(), &next_ns))
      next_ns = event.time_delta_ns() > 0 ? INT64_MAX : INT64_MIN;  // as the model saturates
    sampler_.before_event(next_ns);
  }
  ReplayStep after_event(const EventFields&) { return ReplayStep::kGoOn; }
  void on_record(const proto::Record& record) {
    if (record.kind_case() == proto::Record::kStart) start_monotonic_ns_ = record.start().start_monotonic_ns();
  }
  std::optional<uint64_t> start_monotonic_ns() const { return start_monotonic_ns_; }

 private:
  const MemoryModel& model_;
  IntervalSampler& sampler_;
  std::optional<uint64_t> start_monotonic_ns_;
};

}  // namespace

void IntervalSampler::before_event(int64_t time_ns) {
  if (!interval_ns_) return;
  for (auto& [device, row] : pending_)
    if (!row.fragmentation && row.time_ns / *interval_ns_ != time_ns / *interval_ns_)
      row.fragmentation = model_.fragmentation(device);
}

void IntervalSampler::add(TimelineRow row) {
  if (!interval_ns_) {
    row.fragmentation = model_.fragmentation(row.device);
    return on_row_(row);
  }
  auto it = pending_.find(row.device);
  if (it == pending_.end()) {
    pending_.emplace(row.device, row);
    return;
  }
  TimelineRow& pending = it->second;
  if (pending.time_ns / *interval_ns_ != row.time_ns / *interval_ns_) {
    if (!pending.fragmentation) pending.fragmentation = model_.fragmentation(row.device);
    on_row_(pending);
    pending = row;
    return;
  }
  pending.time_ns = row.time_ns;
  pending.fragmentation.reset();
  pending.totals.allocated_bytes = std::max(pending.totals.allocated_bytes, row.totals.allocated_bytes);
  pending.totals.reserved_bytes = std::max(pending.totals.reserved_bytes, row.totals.reserved_bytes);
  pending.totals.driver_bytes = std::max(pending.totals.driver_bytes, row.totals.driver_bytes);
}

void IntervalSampler::flush() {
  for (auto& [device, row] : pending_) {
    if (!row.fragmentation) row.fragmentation = model_.fragmentation(device);
    on_row_(row);
  }
  pending_.clear();
}

TimelinePlan plan_timeline(const std::string& path, std::optional<int64_t> interval_ns) {
  MemoryModel layers;
  PlanObserver observer(layers, interval_ns);
  replay_trace(path, {}, layers, observer);
  TimelinePlan plan;
  plan.layer_hints = layers.layer_hints();
  // Per device at most a row per event, and with an interval one more than the interval changes.
  uint64_t events = layers.health().events;
  double per_device = interval_ns ? std::min(double(events), double(observer.interval_changes()) + 1) : double(events);
  double rows = double(layers.devices().size()) * per_device;
  plan.incremental_fragmentation = keep_fragmentation(events, rows, observer.max_live());
  return plan;
}

TimelineEnd replay_timeline(const std::string& path, const TimelinePlan& plan, std::optional<int64_t> interval_ns,
                            const TimelineRowSink& on_row) {
  MemoryModel model;
  model.set_incremental_fragmentation(plan.incremental_fragmentation);
  IntervalSampler sampler(on_row, model, interval_ns);
  model.set_totals_callback([&](int32_t device, int64_t time_ns, const DeviceTotals& totals) {
    sampler.add(TimelineRow{device, time_ns, totals, std::nullopt});
  });
  RowObserver observer(model, sampler);
  ReplayOutcome outcome = replay_trace(path, plan.layer_hints, model, observer);
  sampler.flush();
  return TimelineEnd{std::move(outcome.read), model.health().events, observer.start_monotonic_ns(),
                     model.fragmentation_unknown_from_event()};
}

}  // namespace memtrace
