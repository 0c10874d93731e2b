// The rows of `memtrace timeline`: one per event that changes a device's totals (time from trace start,
// device, allocated, reserved, driver, and the fragmentation: reserved minus allocated, segment count,
// largest free block), produced in order as the trace is replayed; writing them (CSV, JSON) is the cli's.
// With an interval, at most one row per device per interval, at the time of its last change, holding the
// highest value each total reached within the interval (a sampled timeline must not hide a peak) and the
// fragmentation at that last change.
//
// Two passes (model/replay.h). The first (plan_timeline) learns each device's layers, so that every row
// means the same thing, and how the fragmentation is cheaper to get: walked for each row written
// (O(live allocations) a row) or kept up to date at every event (O(log^2 live blocks) an event:
// MemoryModel::set_incremental_fragmentation). Rows x live bounds the one, events the other, so that no
// trace makes a row cost O(live). The second (replay_timeline) replays with what the first learnt and
// hands on the rows. A damaged file fails in the first pass, before any row.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "model/memory_model.h"
#include "read/trace_reader.h"

namespace memtrace {

struct TimelineRow {
  int32_t device = -1;
  int64_t time_ns = 0;  // since trace start
  DeviceTotals totals;
  std::optional<Fragmentation> fragmentation;  // taken at time_ns (always set in a row handed on)
};

using TimelineRowSink = std::function<void(const TimelineRow&)>;

// Keeps, per device, the current interval's row (its maxima, at its last change) and hands it on when a
// later interval starts; without an interval, hands on every row at once with the fragmentation now.
// `model` is the one being replayed: the fragmentation is read from it.
class IntervalSampler {
 public:
  IntervalSampler(TimelineRowSink on_row, const MemoryModel& model, std::optional<int64_t> interval_ns)
      : on_row_(std::move(on_row)), model_(model), interval_ns_(interval_ns) {}
  // Called with the time of the next event before the model applies it: a pending row whose interval
  // ends here takes its fragmentation now, while the model still holds its last change.
  void before_event(int64_t time_ns);
  // A change of `row.device`'s totals (MemoryModel's totals callback), just after the model applied it.
  void add(TimelineRow row);
  // At the end of the trace: the model holds every pending row's last change.
  void flush();

 private:
  TimelineRowSink on_row_;
  const MemoryModel& model_;
  std::optional<int64_t> interval_ns_;
  std::map<int32_t, TimelineRow> pending_;
};

// What the first pass learns for the second.
struct TimelinePlan {
  std::map<int32_t, LayerHint> layer_hints;
  bool incremental_fragmentation = false;  // keep it up to date at every event rather than walk it per row
};

// The first pass over the trace at `path`, for rows at most one per device per `interval_ns` (none: one
// per change). Throws TraceError where the file does not read.
TimelinePlan plan_timeline(const std::string& path, std::optional<int64_t> interval_ns);

// What the second pass read, for the reports' trailer.
struct TimelineEnd {
  TraceReadSummary read;                       // truncation: rows go up to the last complete chunk
  uint64_t events = 0;                         // events replayed
  std::optional<uint64_t> start_monotonic_ns;  // the TraceStart's CLOCK_MONOTONIC at time zero
  // Where the fragmentation became unknown (MemoryModel::fragmentation_unknown_from_event), if it did.
  std::optional<uint64_t> fragmentation_unknown_from_event;
};

// The second pass: replays the trace at `path` as `plan` says and hands each row to `on_row`, in order
// (the last rows, one per device with an interval, after the last event). Throws TraceError where the file
// does not read (it changed since plan_timeline): the rows pending then are not handed on.
TimelineEnd replay_timeline(const std::string& path, const TimelinePlan& plan, std::optional<int64_t> interval_ns,
                            const TimelineRowSink& on_row);

}  // namespace memtrace
