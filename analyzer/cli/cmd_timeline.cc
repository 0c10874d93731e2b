// `memtrace timeline TRACE... --csv|--json [--interval SECONDS]`. One trace: the rows of model/timeline.h (one per
// event that changes a device's totals, or with --interval at most one per device per interval, holding the
// interval's maxima), written as CSV or JSON as the trace is replayed. Several traces (or a directory of them):
// per physical GPU, the combined rows of the processes that used it (fleet/combined_timeline.h), streamed.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "fleet/combined_timeline.h"
#include "fleet/read_many.h"
#include "model/timeline.h"
#include "util/checked_math.h"
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

// The command line: TRACE... --csv|--json [--interval SECONDS] (--interval as given, checked by parse_interval).
struct TimelineArgs {
  std::vector<std::string> traces;
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

// ---- Several traces: the combined rows of each GPU ----

// A physical GPU and the processes that used it: by the UUID of their Device records, else by host and ordinal.
struct SharedGpu {
  std::string label;  // the UUID ("GPU-..."), or host_ordinal() where the traces name none
  std::vector<CombinedMember> members;
  std::vector<size_t> member_process;  // each member's index into the processes
};

// A GPU the traces name no UUID for: "HOST/cuda:ORDINAL" ("cuda:ORDINAL" where the trace names no host either).
std::string host_ordinal(const std::string& host, const std::string& ordinal) {
  return (host.empty() ? "" : host + "/") + "cuda:" + ordinal;
}

std::vector<SharedGpu> group_by_gpu(const std::vector<ProcessSummary>& processes) {
  std::vector<SharedGpu> gpus;
  std::map<std::string, size_t> by_key;  // "G" + UUID, or "H" + ordinal + "/" + host
  for (size_t p = 0; p < processes.size(); ++p)
    for (const ProcessDevice& device : processes[p].devices) {
      if (device.ordinal < 0) continue;  // events of no device (PYTHON_FINALIZING): no GPU's memory
      const std::string ordinal = std::to_string(device.ordinal);
      const std::string key = device.gpu.empty() ? "H" + ordinal + "/" + processes[p].host : "G" + device.gpu;
      auto [it, added] = by_key.emplace(key, gpus.size());
      if (added)
        gpus.push_back(SharedGpu{device.gpu.empty() ? host_ordinal(processes[p].host, ordinal) : device.gpu, {}, {}});
      gpus[it->second].members.push_back(CombinedMember{processes[p].trace, device.ordinal});
      gpus[it->second].member_process.push_back(p);
    }
  return gpus;
}

// One row of the combined output: the GPU's totals and each member's allocated.
struct CombinedRow {
  uint64_t unix_ns = 0;
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  std::vector<uint64_t> member_allocated_bytes;
};

// Hands on a row per change, or with an interval (on the wall clock, from the epoch: whole seconds for
// --interval 1) one per interval at its last change, each figure the highest it reached within the interval.
class CombinedSampler {
 public:
  CombinedSampler(std::optional<int64_t> interval_ns, std::function<void(const CombinedRow&)> on_row)
      : interval_ns_(interval_ns), on_row_(std::move(on_row)) {}
  void add(const CombinedChange& c) {
    const uint64_t interval = interval_ns_ ? c.unix_ns / uint64_t(*interval_ns_) : 0;
    if (pending_ && interval_ns_ && interval == interval_) {
      // Only c.member's figures changed since the interval's first row was taken.
      pending_->unix_ns = c.unix_ns;
      pending_->allocated_bytes = std::max(pending_->allocated_bytes, c.allocated_bytes);
      pending_->reserved_bytes = std::max(pending_->reserved_bytes, c.reserved_bytes);
      uint64_t& member = pending_->member_allocated_bytes[c.member];
      member = std::max(member, c.member_allocated_bytes[c.member]);
      return;
    }
    flush();
    pending_ = CombinedRow{c.unix_ns,
                           c.allocated_bytes,
                           c.reserved_bytes,
                           {c.member_allocated_bytes.begin(), c.member_allocated_bytes.end()}};
    interval_ = interval;
    if (!interval_ns_) flush();
  }
  void flush() {
    if (pending_) on_row_(*pending_);
    pending_.reset();
  }

 private:
  std::optional<int64_t> interval_ns_;
  std::function<void(const CombinedRow&)> on_row_;
  std::optional<CombinedRow> pending_;
  uint64_t interval_ = 0;
};

// Nanoseconds since the epoch as seconds with nine decimals, exactly (a double would round them to 0.2 us).
std::string unix_seconds(uint64_t unix_ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%llu.%09llu", static_cast<unsigned long long>(unix_ns / 1000000000),
                static_cast<unsigned long long>(unix_ns % 1000000000));
  return text;
}

// A CSV field: quoted (RFC 4180) where it holds a comma or a quote (a host name comes from the file; line breaks
// are gone through terminal_safe).
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// The process columns' names: pid_N_allocated_bytes, and for a pid that an earlier trace had too (another host,
// a reused pid) pid_N_2_allocated_bytes, _3, ...
std::vector<std::string> process_columns(const std::vector<ProcessSummary>& processes) {
  std::map<uint32_t, int> seen;
  std::vector<std::string> columns;
  for (const ProcessSummary& p : processes) {
    int n = ++seen[p.pid];
    columns.push_back("pid_" + std::to_string(p.pid) + (n > 1 ? "_" + std::to_string(n) : "") + "_allocated_bytes");
  }
  return columns;
}

// JSON text of strings from the traces and the command line: invalid UTF-8 replaced, and nothing a terminal acts on.
std::string safe_dump(const nlohmann::json& value) {
  return json_terminal_safe(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

nlohmann::json moment_json(const CombinedMoment& m) {
  return {{"unix_ns", m.unix_ns},
          {"allocated_bytes", m.allocated_bytes},
          {"reserved_bytes", m.reserved_bytes},
          {"process_allocated_bytes", m.member_allocated_bytes},
          {"process_reserved_bytes", m.member_reserved_bytes}};
}

// Writes the combined rows of every GPU as CSV (one table: a column per process, empty where the process did not
// use the row's GPU) or as one JSON document (a GPU after the other, its rows, its peaks).
class CombinedWriter {
 public:
  CombinedWriter(bool json, const std::vector<ProcessSummary>& processes) : json_(json), processes_(processes) {
    if (json_) {
      std::cout << "{\"gpus\": [";
      return;
    }
    std::cout << "time_unix_s,gpu,allocated_bytes,reserved_bytes";
    for (const std::string& column : process_columns(processes)) std::cout << ',' << column;
    std::cout << '\n';
  }
  void begin_gpu(const SharedGpu& gpu) {
    gpu_ = &gpu;
    rows_ = 0;
    if (!json_) return;
    nlohmann::json users = nlohmann::json::array();
    for (size_t m = 0; m < gpu.members.size(); ++m) {
      const ProcessSummary& p = processes_[gpu.member_process[m]];
      users.push_back({{"trace", p.trace}, {"pid", p.pid}, {"host", p.host}, {"ordinal", gpu.members[m].ordinal}});
    }
    std::cout << (gpus_++ ? ",\n" : "\n") << "{\"gpu\": " << safe_dump(gpu.label)
              << ", \"processes\": " << safe_dump(users) << ", \"rows\": [";
  }
  void row(const CombinedRow& row) {
    if (json_) {
      nlohmann::json r = {{"unix_ns", row.unix_ns},
                          {"allocated_bytes", row.allocated_bytes},
                          {"reserved_bytes", row.reserved_bytes},
                          {"process_allocated_bytes", row.member_allocated_bytes}};
      std::cout << (rows_ ? ",\n  " : "\n  ") << r.dump();
    } else {
      std::cout << unix_seconds(row.unix_ns) << ',' << csv_field(terminal_safe(gpu_->label)) << ','
                << row.allocated_bytes << ',' << row.reserved_bytes << process_cells(row) << '\n';
    }
    ++rows_;
  }
  void end_gpu(const std::pair<CombinedMoment, CombinedMoment>& peaks) {
    if (!json_) return;
    std::cout << "\n], \"peak_allocated\": " << moment_json(peaks.first).dump()
              << ", \"peak_reserved\": " << moment_json(peaks.second).dump() << "}";
  }
  void finish() {
    if (!json_) return;
    nlohmann::json traces = nlohmann::json::array();
    for (const ProcessSummary& p : processes_) traces.push_back({{"trace", p.trace}, {"truncated", p.truncated}});
    std::cout << "\n], \"traces\": " << safe_dump(traces) << "}\n";
  }

 private:
  // ",a,b,..." over every process: the sum of its members' allocated on this GPU, empty where it has none.
  std::string process_cells(const CombinedRow& row) const {
    std::vector<std::optional<uint64_t>> cells(processes_.size());
    for (size_t m = 0; m < row.member_allocated_bytes.size(); ++m) {
      std::optional<uint64_t>& cell = cells[gpu_->member_process[m]];
      cell = saturating_add(cell.value_or(0), row.member_allocated_bytes[m]);
    }
    std::string text;
    for (const std::optional<uint64_t>& cell : cells) text += cell ? "," + std::to_string(*cell) : ",";
    return text;
  }

  bool json_;
  const std::vector<ProcessSummary>& processes_;
  const SharedGpu* gpu_ = nullptr;
  uint64_t gpus_ = 0, rows_ = 0;
};

// The processes' traces read, or the one line of each trace that is not (exit 2): the combined rows need every
// process on the wall clock, so a trace that does not read, or has no start time, stops the command before any row.
std::optional<std::vector<ProcessSummary>> read_for_combined(const std::vector<std::string>& traces) {
  ReadManyResult read = read_processes(traces, ReadManyOptions{});
  for (const UnreadableTrace& u : read.unreadable)
    std::cerr << "memtrace: " << terminal_safe(u.trace) << ": " << terminal_safe(u.error) << '\n';
  bool ok = read.unreadable.empty();
  for (const ProcessSummary& p : read.processes)
    if (p.start_unix_ns == 0) {
      std::cerr << "memtrace: " << terminal_safe(p.trace) << ": no wall-clock start (TraceStart.start_unix_ns): its "
                << "events cannot be put on the wall clock to combine them with other processes'\n";
      ok = false;
    }
  if (!ok) return std::nullopt;
  return std::move(read.processes);
}

// `memtrace timeline` of several traces: per GPU, its combined rows.
int combined_timeline(const std::vector<std::string>& traces, bool json, std::optional<int64_t> interval_ns) {
  std::optional<std::vector<ProcessSummary>> processes = read_for_combined(traces);
  if (!processes) return kExitBadInput;
  const std::vector<SharedGpu> gpus = group_by_gpu(*processes);
  CombinedWriter writer(json, *processes);
  for (const SharedGpu& gpu : gpus) {
    try {
      CombinedSeries series(gpu.members);  // replays the GPU's traces: an error here comes before its rows
      writer.begin_gpu(gpu);
      CombinedSampler sampler(interval_ns, [&](const CombinedRow& row) { writer.row(row); });
      auto peaks = series.merge([&](const CombinedChange& change) { sampler.add(change); });
      sampler.flush();
      writer.end_gpu(peaks);
    } catch (const CombinedTraceError& e) {  // a file that changed since it was read
      std::cout.flush();
      return report_trace_error(e.trace(), e);
    }
  }
  writer.finish();
  for (const ProcessSummary& p : *processes)
    if (p.truncated)
      std::cerr << "memtrace: " << terminal_safe(p.trace) << ": truncated trace, rows up to its last complete chunk\n";
  return kExitOk;
}

// `memtrace timeline` of one trace.
int single_timeline(const std::string& trace, bool json, std::optional<int64_t> interval_ns) {
  TimelinePlan plan;
  try {
    // A damaged file fails here, before any row is printed.
    plan = plan_timeline(trace, interval_ns);
  } catch (const TraceError& e) {
    return report_trace_error(trace, e);
  }
  RowWriter writer(json);
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

bool is_directory(const std::string& path) {
  struct stat s;
  return ::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

}  // namespace

// `memtrace timeline` once its command line is parsed. One TRACE that is a file is read as it always was (a
// missing one is the reader's error); anything else is expanded (fleet/read_many.h), and where that names one
// trace, it is read the same way.
static int timeline(const TimelineArgs& args) {
  if (args.traces.empty()) throw UsageError("no TRACE file given");
  for (const std::string& trace : args.traces)
    if (trace.empty()) throw UsageError("the TRACE file name is empty");
  const TraceArg first_arg{args.traces[0], true};
  const std::string& first = check_trace(first_arg);  // named by the last-resort error line
  if (args.csv == args.json) throw UsageError("timeline needs exactly one of --csv, --json");
  std::optional<int64_t> interval_ns = parse_interval(args.interval);
  if (args.traces.size() == 1 && !is_directory(first)) return single_timeline(first, args.json, interval_ns);
  std::vector<std::string> traces;
  try {
    traces = expand_trace_args(args.traces);
  } catch (const TraceArgError& e) {
    std::cerr << "memtrace: " << terminal_safe(e.what()) << '\n';
    return kExitBadInput;
  }
  if (traces.size() == 1) return single_timeline(traces[0], args.json, interval_ns);
  return combined_timeline(traces, args.json, interval_ns);
}

RunCommand add_timeline(CLI::App& memtrace) {
  auto args = std::make_shared<TimelineArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "timeline",
      "one row per change of a device's totals (allocated, reserved, driver) and fragmentation; of several traces "
      "(or a directory of them), per GPU one row per change of the processes' combined totals");
  // Not ->required(): timeline() says what is missing in the project's words, after --help had its turn.
  command
      ->add_option_function<std::vector<std::string>>(
          "TRACE", [args = args.get()](const std::vector<std::string>& paths) { args->traces = paths; },
          "the .mtrace files to read, or directories of them")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("");
  command->add_flag("--csv", args->csv, "the rows as CSV, with a header line");
  command->add_flag("--json", args->json, "the rows as one JSON document, with the trace's health");
  command
      ->add_option_function<std::string>(
          "--interval", [args = args.get()](const std::string& value) { args->interval = value; },
          "at most one row per device (GPU) per interval, holding the highest value each figure reached in it")
      ->type_name("SECONDS");
  return [args] { return timeline(*args); };
}

}  // namespace memtrace
