// `memtrace timeline TRACE --csv|--json [--interval S]`: one row per event that changes a device's
// totals (time from trace start, device, allocated, reserved, driver, and fragmentation: reserved minus
// allocated, segment count, largest free block), streamed as the trace is read.
// With --interval, at most one row per device per interval, at the time of its last change, holding the
// highest value each total reached within the interval (a sampled timeline must not hide a peak) and
// the fragmentation at that last change. The fragmentation is either walked for each row written
// (O(live allocations) a row) or kept up to date at every event (O(log^2 live blocks) an event:
// MemoryModel::set_incremental_fragmentation), whichever the first pass says costs less: rows x live
// bounds the one, events the other, so that no trace makes a row cost O(live).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

struct Row {
  int32_t device;
  int64_t time_ns;
  DeviceTotals totals;
  std::optional<Fragmentation> fragmentation;  // taken at time_ns (set before the row is written)
};

class RowWriter {
 public:
  explicit RowWriter(bool json) : json_(json) {
    if (json_) std::cout << "{\"rows\": [";
    else
      std::cout << "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,"
                   "segment_count,largest_free_block_bytes\n";
  }
  // Segment count and largest free block are empty (CSV) or null (JSON) where segments are unknown.
  void write(const Row& row) {
    Fragmentation f = row.fragmentation.value_or(Fragmentation{});
    if (json_) {
      nlohmann::json r = {{"time_s", seconds(row.time_ns)}, {"device", row.device},
                          {"allocated_bytes", row.totals.allocated_bytes},
                          {"reserved_bytes", row.totals.reserved_bytes}, {"driver_bytes", row.totals.driver_bytes},
                          {"reserved_minus_allocated_bytes", f.reserved_minus_allocated_bytes},
                          {"segment_count", f.segments_known ? nlohmann::json(f.segment_count) : nlohmann::json(nullptr)},
                          {"largest_free_block_bytes",
                           f.segments_known ? nlohmann::json(f.largest_free_block_bytes) : nlohmann::json(nullptr)}};
      std::cout << (rows_ ? ",\n  " : "\n  ") << r.dump();
    } else {
      char time[32];
      std::snprintf(time, sizeof time, "%.9f", seconds(row.time_ns));
      std::cout << time << ',' << row.device << ',' << row.totals.allocated_bytes << ','
                << row.totals.reserved_bytes << ',' << row.totals.driver_bytes << ','
                << f.reserved_minus_allocated_bytes << ',';
      if (f.segments_known) std::cout << f.segment_count << ',' << f.largest_free_block_bytes;
      else std::cout << ',';
      std::cout << '\n';
    }
    ++rows_;
  }
  void finish(const TraceReadSummary& read, const MemoryModel& model, std::optional<uint64_t> start_monotonic_ns) {
    if (!json_) return;
    nlohmann::json trace = {{"events", model.health().events}, {"truncated", read.truncated}};
    // CLOCK_MONOTONIC at time zero, to line up time_s with a script's own monotonic clock.
    if (start_monotonic_ns) trace["start_monotonic_ns"] = *start_monotonic_ns;
    if (read.truncated) trace["truncated_tail"] = read.tail;
    if (auto from = model.fragmentation_unknown_from_event()) trace["fragmentation_unknown_from_event"] = *from;
    std::cout << "\n], \"trace\": " << trace.dump() << "}\n";
  }

 private:
  bool json_;
  uint64_t rows_ = 0;
};

// Keeps, per device, the current interval's row (its maxima, at its last change) and writes it when a
// later interval starts.
class IntervalSampler {
 public:
  IntervalSampler(RowWriter& writer, const MemoryModel& model, std::optional<int64_t> interval_ns)
      : writer_(writer), model_(model), interval_ns_(interval_ns) {}
  // Called with the time of the next event before the model applies it: a pending row whose interval
  // ends here takes its fragmentation now, while the model still holds its last change.
  void before_event(int64_t time_ns) {
    if (!interval_ns_) return;
    for (auto& [device, row] : pending_)
      if (!row.fragmentation && row.time_ns / *interval_ns_ != time_ns / *interval_ns_)
        row.fragmentation = model_.fragmentation(device);
  }
  void add(Row row) {
    if (!interval_ns_) {
      row.fragmentation = model_.fragmentation(row.device);
      return writer_.write(row);
    }
    auto it = pending_.find(row.device);
    if (it == pending_.end()) {
      pending_.emplace(row.device, row);
      return;
    }
    Row& pending = it->second;
    if (pending.time_ns / *interval_ns_ != row.time_ns / *interval_ns_) {
      if (!pending.fragmentation) pending.fragmentation = model_.fragmentation(row.device);
      writer_.write(pending);
      pending = row;
      return;
    }
    pending.time_ns = row.time_ns;
    pending.fragmentation.reset();
    pending.totals.allocated_bytes = std::max(pending.totals.allocated_bytes, row.totals.allocated_bytes);
    pending.totals.reserved_bytes = std::max(pending.totals.reserved_bytes, row.totals.reserved_bytes);
    pending.totals.driver_bytes = std::max(pending.totals.driver_bytes, row.totals.driver_bytes);
  }
  // At the end of the trace: the model holds every pending row's last change.
  void flush() {
    for (auto& [device, row] : pending_) {
      if (!row.fragmentation) row.fragmentation = model_.fragmentation(device);
      writer_.write(row);
    }
    pending_.clear();
  }

 private:
  RowWriter& writer_;
  const MemoryModel& model_;
  std::optional<int64_t> interval_ns_;
  std::map<int32_t, Row> pending_;
};

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

// About 31.7 years: far beyond any trace, and 1e18 ns stays inside int64_t (9.2e18).
constexpr int64_t kMaxIntervalSeconds = 1000000000;

std::optional<int64_t> parse_interval(const ParsedArgs& parsed) {
  const std::string* text = parsed.value("--interval");
  if (!text) return std::nullopt;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // Decimal only (stod also reads "0x10" and "inf"), and at most kMaxIntervalSeconds, whose nanoseconds an
  // int64 holds: a larger value used to overflow and silently give one row per event.
  const bool decimal = text->find_first_not_of("0123456789.eE+-") == std::string::npos;
  // At least a nanosecond, the trace's resolution: a smaller interval would silently be one.
  if (!decimal || used != text->size() || !(value >= 1e-9) || value > kMaxIntervalSeconds)
    throw UsageError("--interval needs a number of seconds from 1e-9 to " + std::to_string(kMaxIntervalSeconds) +
                     ", not '" + *text + "'");
  return std::max<int64_t>(1, std::llround(value * 1e9));
}

}  // namespace

int cmd_timeline(const std::vector<std::string>& args) {
  ParsedArgs parsed = parse_report_args(args, {"--csv", "--json"}, {"--interval"});
  if (parsed.has("--csv") == parsed.has("--json")) throw UsageError("timeline needs exactly one of --csv, --json");
  std::optional<int64_t> interval_ns = parse_interval(parsed);
  MemoryModel model;
  try {
    // First pass: which devices have a block / allocator layer, so that every row means the same
    // thing. A damaged file fails here, before any row is printed.
    MemoryModel layers;
    size_t max_live = 0;
    IntervalChanges intervals(interval_ns.value_or(1));
    read_trace(parsed.trace, SinkOf{[&](const EventFields& event) {
                                      layers.apply(event);
                                      max_live = std::max(max_live, layers.live_allocations());
                                      if (interval_ns) intervals.note(layers.now_ns());
                                    },
                                    ignore_record});
    model.set_layer_hints(layers.layer_hints());
    // Per device at most a row per event, and with --interval one more than the interval changes.
    uint64_t events = layers.health().events;
    double per_device = interval_ns ? std::min(double(events), double(intervals.changes()) + 1) : double(events);
    double rows = double(layers.devices().size()) * per_device;
    model.set_incremental_fragmentation(keep_fragmentation(events, rows, max_live));
  } catch (const TraceError& e) {
    return report_trace_error(parsed.trace, e);
  }
  RowWriter writer(parsed.has("--json"));
  IntervalSampler sampler(writer, model, interval_ns);
  model.set_totals_callback([&](int32_t device, int64_t time_ns, const DeviceTotals& totals) {
    sampler.add(Row{device, time_ns, totals});
  });
  TraceReadSummary read;
  std::optional<uint64_t> start_monotonic_ns;
  try {
    auto on_event = [&](const EventFields& event) {
      int64_t next_ns;
      if (__builtin_add_overflow(model.now_ns(), event.time_delta_ns(), &next_ns))
        next_ns = event.time_delta_ns() > 0 ? INT64_MAX : INT64_MIN;  // as the model saturates
      sampler.before_event(next_ns);
      model.apply(event);
    };
    auto on_record = [&](const proto::Record& record) {
      if (record.kind_case() == proto::Record::kStart) start_monotonic_ns = record.start().start_monotonic_ns();
    };
    read = read_trace(parsed.trace, SinkOf{on_event, on_record});
  } catch (const TraceError& e) {  // the file changed between the passes
    std::cout.flush();
    return report_trace_error(parsed.trace, e);
  }
  sampler.flush();
  writer.finish(read, model, start_monotonic_ns);
  if (read.truncated)
    std::cerr << "memtrace: " << terminal_safe(parsed.trace) << ": truncated trace, rows up to the last complete chunk (after byte "
              << read.complete_bytes << ": " << read.tail << ")\n";
  if (auto from = model.fragmentation_unknown_from_event())
    std::cerr << "memtrace: " << terminal_safe(parsed.trace) << ": segments overlap (a damaged trace): segment_count and "
              << "largest_free_block_bytes are left empty from event " << *from << " on\n";
  return kExitOk;
}

}  // namespace memtrace
