// `memtrace timeline TRACE --csv|--json [--interval SECONDS]`: the rows of model/timeline.h (one per event that
// changes a device's totals, or with --interval at most one per device per interval, holding the interval's
// maxima), written as CSV or JSON as the trace is replayed.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "model/timeline.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

class RowWriter {
 public:
  explicit RowWriter(bool json) : json_(json) {
    if (json_) std::cout << "{\"rows\": [";
    else
      std::cout << "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,"
                   "segment_count,largest_free_block_bytes\n";
  }
  // Segment count and largest free block are empty (CSV) or null (JSON) where segments are unknown.
  void write(const TimelineRow& row) {
    Fragmentation f = row.fragmentation.value_or(Fragmentation{});
    if (json_) {
      nlohmann::json r = {{"time_s", seconds(row.time_ns)},
                          {"device", row.device},
                          {"allocated_bytes", row.totals.allocated_bytes},
                          {"reserved_bytes", row.totals.reserved_bytes},
                          {"driver_bytes", row.totals.driver_bytes},
                          {"reserved_minus_allocated_bytes", f.reserved_minus_allocated_bytes},
                          {"segment_count",
                           f.segments_known ? nlohmann::json(f.segment_count) : nlohmann::json(nullptr)},
                          {"largest_free_block_bytes",
                           f.segments_known ? nlohmann::json(f.largest_free_block_bytes) : nlohmann::json(nullptr)}};
      std::cout << (rows_ ? ",\n  " : "\n  ") << r.dump();
    } else {
      char time[32];
      std::snprintf(time, sizeof time, "%.9f", seconds(row.time_ns));
      std::cout << time << ',' << row.device << ',' << row.totals.allocated_bytes << ',' << row.totals.reserved_bytes
                << ',' << row.totals.driver_bytes << ',' << f.reserved_minus_allocated_bytes << ',';
      if (f.segments_known) std::cout << f.segment_count << ',' << f.largest_free_block_bytes;
      else std::cout << ',';
      std::cout << '\n';
    }
    ++rows_;
  }
  void finish(const TimelineEnd& end) {
    if (!json_) return;
    nlohmann::json trace = {{"events", end.events}, {"truncated", end.read.truncated}};
    // CLOCK_MONOTONIC at time zero, to line up time_s with a script's own monotonic clock.
    if (end.start_monotonic_ns) trace["start_monotonic_ns"] = *end.start_monotonic_ns;
    if (end.read.truncated) trace["truncated_tail"] = end.read.tail;
    if (auto from = end.fragmentation_unknown_from_event) trace["fragmentation_unknown_from_event"] = *from;
    std::cout << "\n], \"trace\": " << trace.dump() << "}\n";
  }

 private:
  bool json_;
  uint64_t rows_ = 0;
};

// About 31.7 years: far beyond any trace, and 1e18 ns stays inside int64_t (9.2e18).
constexpr int64_t kMaxIntervalSeconds = 1000000000;

// The command line: TRACE --csv|--json [--interval SECONDS] (--interval as given, checked by parse_interval).
struct TimelineArgs {
  TraceArg trace;
  bool csv = false;
  bool json = false;
  std::optional<std::string> interval;
};

std::optional<int64_t> parse_interval(const std::optional<std::string>& text) {
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

// `memtrace timeline` once its command line is parsed.
static int timeline(const TimelineArgs& args) {
  const std::string& trace = check_trace(args.trace);
  if (args.csv == args.json) throw UsageError("timeline needs exactly one of --csv, --json");
  std::optional<int64_t> interval_ns = parse_interval(args.interval);
  TimelinePlan plan;
  try {
    // A damaged file fails here, before any row is printed.
    plan = plan_timeline(trace, interval_ns);
  } catch (const TraceError& e) {
    return report_trace_error(trace, e);
  }
  RowWriter writer(args.json);
  TimelineEnd end;
  try {
    end = replay_timeline(trace, plan, interval_ns, [&](const TimelineRow& row) { writer.write(row); });
  } catch (const TraceError& e) {  // the file changed between the passes
    std::cout.flush();
    return report_trace_error(trace, e);
  }
  writer.finish(end);
  if (end.read.truncated)
    std::cerr << "memtrace: " << terminal_safe(trace)
              << ": truncated trace, rows up to the last complete chunk (after byte " << end.read.complete_bytes << ": "
              << end.read.tail << ")\n";
  if (auto from = end.fragmentation_unknown_from_event)
    std::cerr << "memtrace: " << terminal_safe(trace) << ": segments overlap (a damaged trace): segment_count and "
              << "largest_free_block_bytes are left empty from event " << *from << " on\n";
  return kExitOk;
}

RunCommand add_timeline(CLI::App& memtrace) {
  auto args = std::make_shared<TimelineArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "timeline", "one row per change of a device's totals (allocated, reserved, driver) and fragmentation");
  add_trace(*command, &args->trace);
  command->add_flag("--csv", args->csv, "the rows as CSV, with a header line");
  command->add_flag("--json", args->json, "the rows as one JSON document, with the trace's health");
  command
      ->add_option_function<std::string>(
          "--interval", [args = args.get()](const std::string& value) { args->interval = value; },
          "at most one row per device per interval, holding the highest value each total reached in it")
      ->type_name("SECONDS");
  return [args] { return timeline(*args); };
}

}  // namespace memtrace
