// Replaying a trace up to chosen moments: "read the file once more into a fresh MemoryModel and call me at
// these moments". The reports need the model's state at moments they learn only from a first pass over
// the whole trace (each device's peak allocated event, each OOM, every change of a device's totals for a
// timeline), and the model keeps no history, so they replay the events again and look at the model there.
//
// One replay, two ways to say where to stop:
//   - replay_to_moments: a list of moments (ReplayMoment: an event index, a position among the file's events
//     from 0 as Peak::event_index counts them, and whether the moment is right after that event or right before
//     it, at attach); the callback runs at each of them, and the file is read no further than the last.
//   - replay_trace: an observer called around every event (before_event, optional; after_event, which
//     says whether to go on) and with every other record (on_record, optional): for callers that find
//     their moments as they go (an OOM listed by the model) or want every event (a timeline).
// Both drive a MemoryModel the caller owns and has configured (totals callback, incremental
// fragmentation), after giving it the layer hints of the first pass so that its running totals mean from
// the first event what they mean at the end (memory_model.h, LayerHint).
//
// Damage and truncation are the reader's (read/trace_reader.h) and reach the caller unchanged: a file that
// no longer reads (it changed since the first pass) throws TraceError out of the replay; a truncated one
// is replayed up to its last complete chunk and the outcome's `read` says so. A replay that stops (its
// observer says so, or its last moment has come) has not read the rest of the file: its `read` is empty.
// Stopping unwinds the reader with an exception private to replay_trace: the reader has no other way out.
//
// A work budget for what the callers do at their moments (walking the live allocations, O(live) each) is
// WalkBudget: a number of allocations proportional to the trace's events, so that a report of many moments
// costs a small multiple of one pass whatever the trace holds.
//
// The replay adds nothing per event to the model's own work beyond the observer's calls, which are
// inlined (a template, no std::function per event).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "model/memory_model.h"
#include "read/trace_reader.h"

namespace memtrace {

// What an observer's after_event answers: read on, or stop the replay after this event.
enum class ReplayStep { kGoOn, kStop };

// A moment of a replay: right after the event of index `event_index` is applied, or, `at_attach`, right before it,
// after the attach records read before it: where a peak that what was live at attach reached is (Peak::at_attach).
struct ReplayMoment {
  uint64_t event_index = 0;
  bool at_attach = false;
  static ReplayMoment of(const Peak& peak) { return ReplayMoment{peak.event_index, peak.at_attach}; }
  bool operator==(const ReplayMoment&) const = default;
  // The replay's order: the moment before an event comes before the moment after it.
  bool operator<(const ReplayMoment& other) const {
    return event_index != other.event_index ? event_index < other.event_index : at_attach && !other.at_attach;
  }
};

// Which of a list of moments are due as a replay goes on: before an event is applied (a moment at attach), after
// it, and after the last record (a moment at attach before an event that never came: a trace whose live set at
// attach is all it holds). Each call passes take(i) the index in the list of each moment due, each once.
class MomentCursor {
 public:
  explicit MomentCursor(std::span<const ReplayMoment> moments) : moments_(moments.begin(), moments.end()) {
    for (size_t i = 0; i < moments_.size(); ++i) order_.push_back(i);
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return moments_[a] < moments_[b]; });
  }
  // Before the event of index `next` is applied.
  template <typename Take>
  void before_event(uint64_t next, Take&& take) {
    take_while(ReplayMoment{next, true}, take);
  }
  // After the event of index `index` is applied.
  template <typename Take>
  void after_event(uint64_t index, Take&& take) {
    take_while(ReplayMoment{index, false}, take);
  }
  // After the last record, `events` events having been applied.
  template <typename Take>
  void at_end(uint64_t events, Take&& take) {
    take_while(ReplayMoment{events, true}, take);
  }
  // Every moment has been taken.
  bool done() const { return next_ == order_.size(); }

 private:
  template <typename Take>
  void take_while(ReplayMoment now, Take& take) {
    while (next_ < order_.size() && moments_[order_[next_]] == now) take(order_[next_++]);
  }
  std::vector<ReplayMoment> moments_;
  std::vector<size_t> order_;  // indices into moments_, in the replay's order
  size_t next_ = 0;            // into order_
};

struct ReplayOutcome {
  // Stopped by its observer or after its last moment: the rest of the file (a TraceEnd after the last event,
  // say) was not read, and `read` is empty.
  bool stopped = false;
  uint64_t events = 0;    // events applied to the model by this replay
  TraceReadSummary read;  // of the whole file, when not stopped: truncation, format version, records
};

// Whether an observer type declares the optional parts of the replay's protocol (replay_trace).
template <typename Observer>
concept ObservesBeforeEvent = requires(Observer& o, const EventFields& event) {
  o.before_event(event);
};
template <typename Observer>
concept ObservesRecords = requires(Observer& o, const proto::Record& record) {
  o.on_record(record);
};
template <typename Observer>
concept ReplayObserver = requires(Observer& o, const EventFields& event) {
  { o.after_event(event) } -> std::same_as<ReplayStep>;
};

namespace replay_detail {

struct StopReplay {};  // thrown from the sink to leave the reader once the observer says kStop

// The TraceSink that drives the model: before_event, apply, after_event, for every event.
template <ReplayObserver Observer>
class ReplaySink {
 public:
  ReplaySink(MemoryModel& model, Observer& observer) : model_(model), observer_(observer) {}
  void on_event(const EventFields& event) {
    model_.notify_attach_totals();  // before the observer looks at the state before this event
    if constexpr (ObservesBeforeEvent<Observer>) observer_.before_event(event);
    model_.apply(event);
    ++events_;
    if (observer_.after_event(event) == ReplayStep::kStop) throw StopReplay{};
  }
  void on_record(const proto::Record& record) {
    model_.apply_attach_record(record);  // the live set at attach, before the observer sees the record
    if constexpr (ObservesRecords<Observer>) observer_.on_record(record);
  }
  uint64_t events() const { return events_; }

 private:
  MemoryModel& model_;
  Observer& observer_;
  uint64_t events_ = 0;
};

}  // namespace replay_detail

// Replays the trace at `path` into `model`, which must not have applied any event yet: sets `hints` on it
// (an empty map: none, as a first pass has), then for every event in file order calls
// observer.before_event(event) if the observer has one, model.apply(event), observer.after_event(event); and
// observer.on_record(record), if it has one, for every other record (after model.apply_attach_record(record): the
// allocations live at attach are the model's from their record on; the totals callback hears of them once, before
// the next event or after the last record: MemoryModel::notify_attach_totals). Stops after the event whose
// after_event answers ReplayStep::kStop. The observer sees the model through its own reference to it.
// Throws TraceError where the file does not read (read_trace); anything the observer throws passes through.
template <ReplayObserver Observer>
ReplayOutcome replay_trace(const std::string& path, const std::map<int32_t, LayerHint>& hints, MemoryModel& model,
                           Observer& observer) {
  model.set_layer_hints(hints);
  replay_detail::ReplaySink<Observer> sink(model, observer);
  ReplayOutcome outcome;
  try {
    outcome.read = read_trace(path, sink);
    model.notify_attach_totals();  // a trace with no event after its attach records
  } catch (const replay_detail::StopReplay&) {
    outcome.stopped = true;
  }
  outcome.events = sink.events();
  return outcome;
}

// Replays the trace at `path` into `model` (as replay_trace, with `hints`) and calls at_moment(moment) at each
// of `moments` (any order; a moment listed twice is called once), then stops: the file is read up to the last
// moment only. With no moments, reads nothing. A moment after the file's last event is never called (the outcome
// is then not `stopped`); one at attach before an event that never came is called after the last record.
// Throws TraceError where the file does not read up to the last moment.
ReplayOutcome replay_to_moments(const std::string& path, const std::map<int32_t, LayerHint>& hints, MemoryModel& model,
                                std::span<const ReplayMoment> moments,
                                const std::function<void(ReplayMoment moment)>& at_moment);

// A budget of live allocations walked at a replay's moments, all moments together: `slack` plus `per_event`
// for each of the trace's `events`, saturating. Once one walk is refused, every later one is too, so that
// the moments that have their walk are the first ones.
class WalkBudget {
 public:
  WalkBudget(uint64_t slack, uint64_t per_event, uint64_t events);
  // Takes `allocations` from the budget and answers true, or answers false (now and from then on) where
  // they are more than is left.
  bool take(uint64_t allocations);
  uint64_t left() const { return left_; }
  bool refused() const { return refused_; }

 private:
  uint64_t left_;
  bool refused_ = false;
};

}  // namespace memtrace
