// libFuzzer target for the whole analyzer: every report command's analysis and output, in process, on a
// trace built from records (input format: pipeline_input.h). What these commands do with a file, this does with
// the input's trace, calling the functions the commands call with the arguments they pass:
//   `summary` (text, --json): the iteration analysis (analyze_iterations), the breakdown at each device's peak
//     (breakdowns_at_peaks), the iterations, traps and leaks grouped per iteration;
//   `leaks` (text, --json), with the iteration report and the traps; `oom` (text, --json);
//   `peak` (text, --json, with the tree by user line) at each device's peak, and at a time (--at: the trace's
//     start, a quarter, half or its end, by the flags' interval bits);
//   `diff` (text, --json) of the trace against itself, and against the input less its last chunk (a second
//     in-memory file);
//   `report` (the HTML report's data, report_data, embedded as the page embeds it);
//   `timeline` (--csv, --json, each with and without --interval) and `dump` (with and without --frames); the
//   exports perfetto, pprof, memory-viz (pickle and JSON) and sqlite (into a temporary file).
// Then it checks the outputs:
//   - an input the analysis refuses throws memtrace::TraceError, nothing else (any other exception
//     escapes: a finding); once accepted, every command must accept it too;
//   - every JSON output parses (nlohmann::json::parse), every line of dump's too;
//   - no text output has a byte below 0x20 other than '\n', nor 0x7f: a trace must not write to the
//     user's terminal (off with MEMTRACE_FUZZ_CHECK_TERMINAL=0);
//   - no figure a JSON output computes exceeds 2^63 (a negative total wrapped to uint64) and no *_bytes
//     figure is negative but the differences (signed_by_design: changes, growth); identifiers and values the
//     trace states itself (addresses, requests, cuMemGetInfo samples) are left out, and so is every figure
//     when the byte counts the trace states could add up to 2^63 (stated_bytes_bound) (off with
//     MEMTRACE_FUZZ_CHECK_WRAP=0);
//   - every device's peak allocated >= its final allocated, peak reserved >= final reserved;
//   - a peak breakdown's rows add up to the allocated total at its moment, which at a peak is the device's peak
//     allocated;
//   - a diff of the trace against itself reports no change: every site matched and unchanged, every device's
//     peak, growth per iteration and categories equal, the same iterations, program and devices.
// A failed check prints what failed and __builtin_trap()s, so libFuzzer keeps the input.
//
// The mutator (LLVMFuzzerCustomMutator, LLVMFuzzerCustomCrossOver) works on records: it parses the input
// into chunks of memtrace.proto Records (the generated lite classes) and changes one field to an
// interesting value or one copied from another record (so that stack ids, addresses, graphs line up),
// duplicates / deletes / swaps / moves records, inserts new ones of every kind, blows up a string or a
// stack, splits or merges chunks, changes the header version or flags, turns the input into a raw file,
// or falls back to libFuzzer's byte mutations (of one record, or of the whole input). Deterministic from
// the seed libFuzzer gives. MEMTRACE_FUZZ_MUTATOR_STATS=1 prints how often each mutation was made (at exit
// and every 1000); MEMTRACE_FUZZ_MAX_STACK_FRAMES=N caps the depth of blown-up stacks.
//
// MEMTRACE_FUZZ_WRITE_TRACE=PATH writes the input's trace to PATH (an .mtrace file, for `memtrace` itself);
// MEMTRACE_FUZZ_TIMING=1 prints each stage's time.
//
// The Symbolizer gets no modules (it would open the files a trace names; a fuzzer must not open arbitrary
// paths of this machine); Module records still reach the StackTable.
#include <google/protobuf/stubs/logging.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/diff.h"
#include "analysis/iteration_report.h"
#include "analysis/live_tree.h"
#include "analysis/oom_report.h"
#include "analysis/peak_breakdown.h"
#include "cli/commands.h"
#include "cli/report_session.h"
#include "export/memory_viz.h"
#include "export/perfetto.h"
#include "export/pprof.h"
#include "export/record_dump.h"
#include "export/sqlite_export.h"
#include "fleet/fleet.h"
#include "fleet/process_summary.h"
#include "memtrace.pb.h"
#include "perfetto_trace.pb.h"
#include "pipeline_input.h"
#include "profile.pb.h"
#include "report/html/report_data.h"
#include "report/json/diff_json.h"
#include "report/json/fleet_json.h"
#include "report/json/oom_json.h"
#include "report/json/peak_json.h"
#include "report/json/report_json.h"
#include "report/text/diff_text.h"
#include "report/text/fleet_text.h"
#include "report/text/iterations_text.h"
#include "report/text/oom_text.h"
#include "report/text/peak_text.h"
#include "report/text/report_text.h"
#include "stacks/call_sites.h"
#include "stacks/frames.h"
#include "stacks/symbolizer.h"
#include "util/terminal_text.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using memtrace::fuzz::Chunk;
using memtrace::fuzz::PipelineInput;
namespace proto = memtrace::proto;

// ---------------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------------

bool env_switch(const char* name, bool default_on) {
  const char* value = std::getenv(name);
  if (!value || !*value) return default_on;
  return std::strcmp(value, "0") != 0;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_pipeline: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

// The reader takes a path; in-memory files keep every run off the disk. File 0 is the input's trace, file 1 the
// second trace `diff` compares it with.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(memfd_create(name, 0)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& path() const { return path_; }
  void write(const std::string& file) const {
    if (ftruncate(fd_, 0) != 0) std::abort();
    for (size_t done = 0; done < file.size();) {
      ssize_t n = pwrite(fd_, file.data() + done, file.size() - done, off_t(done));
      if (n <= 0) std::abort();
      done += size_t(n);
    }
  }

 private:
  int fd_;
  std::string path_;
};
const MemFile& mem_file(int which) {
  static const MemFile files[2] = {MemFile("memtrace-fuzz-pipeline"), MemFile("memtrace-fuzz-pipeline-after")};
  return files[which];
}
const std::string& input_path() { return mem_file(0).path(); }

void check_text(const std::string& text, const char* what) {
  static const bool enabled = env_switch("MEMTRACE_FUZZ_CHECK_TERMINAL", true);
  if (!enabled) return;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) {
      size_t from = i < 60 ? 0 : i - 60;
      nlohmann::json context = text.substr(from, 120);
      finding(std::string(what) + ": control byte 0x" + (c < 16 ? "0" : "") +
              [&] {
                char b[4];
                std::snprintf(b, sizeof b, "%x", c);
                return std::string(b);
              }() +
              " at offset " + std::to_string(i) + " of the text output, near " +
              context.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
    }
  }
}

// Keys whose numbers are identifiers or values the trace states itself (not totals the analyzer computes).
bool stated_by_trace(const std::string& key) {
  static const char* const kKeys[] = {"address", "stack_id", "tid", "pid", "ppid", "start_monotonic_ns",
                                      "start_unix_ns", "last_event_unix_ns", "line", "id", "handle", "signal", "result",
                                      "graph", "stream", "context", "requested_bytes", "device_free_bytes",
                                      "device_total_bytes", "process_used_bytes", "other_processes_used_bytes",
                                      "python", "max_native_frames", "max_native_frames_python", "code",
                                      "flush_interval_ms",
                                      // Counts the tracer states (TraceEnd.dropped_events, Notice.count).
                                      "dropped_events", "count"};
  for (const char* k : kKeys)
    if (key == k) return true;
  return false;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Byte figures that are differences, negative where the bytes fell (docs/json.md): diff's changes (after minus
// before), growth per iteration and diff's growth.
bool signed_by_design(const std::string& key) {
  return ends_with(key, "change_bytes") || ends_with(key, "growth_per_iteration_bytes") || key == "growth_bytes";
}

// Walks `j` (no recursion: the depth of a JSON document the analyzer writes is small, but the rule holds).
// An upper bound of every byte figure the analyzer can compute honestly from the trace: the sum of every
// byte count the events state (sizes, allocator totals, samples), times (1 + graph launches), as a launch
// makes its graph's allocation nodes live again. Saturates at UINT64_MAX.
uint64_t stated_bytes_bound() {
  uint64_t sum = 0, launches = 0;
  auto add = [&](uint64_t v) { sum = __builtin_add_overflow(sum, v, &sum) ? UINT64_MAX : sum; };
  memtrace::read_trace(input_path(), memtrace::SinkOf{[&](const memtrace::EventFields& e) {
                                                        add(e.size());
                                                        add(e.allocator_allocated_bytes());
                                                        add(e.allocator_reserved_bytes());
                                                        add(e.device_free_bytes());
                                                        add(e.device_total_bytes());
                                                        add(e.process_used_bytes());
                                                        add(e.other_processes_used_bytes());
                                                        if (e.kind() == proto::GRAPH_LAUNCH) ++launches;
                                                      },
                                                      memtrace::ignore_record});
  uint64_t bound;
  return __builtin_mul_overflow(sum, launches + 1, &bound) ? UINT64_MAX : bound;
}

// Whether a figure above 2^63 in the output is a wrap: only when the trace states no such amount itself
// (an allocation of 2^63 bytes is accepted today, and shows as such).
bool wrap_check_applies = true;

void check_numbers(const nlohmann::json& root, const char* what) {
  static const bool enabled = env_switch("MEMTRACE_FUZZ_CHECK_WRAP", true);
  if (!enabled || !wrap_check_applies) return;
  std::vector<std::pair<const nlohmann::json*, std::string>> todo = {{&root, ""}};
  while (!todo.empty()) {
    auto [j, key] = todo.back();
    todo.pop_back();
    if (j->is_object()) {
      for (auto it = j->begin(); it != j->end(); ++it) todo.emplace_back(&it.value(), it.key());
    } else if (j->is_array()) {
      for (const auto& element : *j) todo.emplace_back(&element, key);
    } else if (j->is_number_unsigned()) {
      if (j->get<uint64_t>() > (uint64_t(1) << 63) && !stated_by_trace(key))
        finding(std::string(what) + ": \"" + key + "\": " + std::to_string(j->get<uint64_t>()) +
                " exceeds 2^63 (a negative figure wrapped to uint64?)");
    } else if (j->is_number_integer()) {
      if (j->get<int64_t>() < 0 && ends_with(key, "_bytes") && !signed_by_design(key))
        finding(std::string(what) + ": \"" + key + "\" is negative: " + std::to_string(j->get<int64_t>()));
    }
  }
}

void check_json(const std::string& text, const char* what) {
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    finding(std::string(what) + ": the JSON output does not parse: " + e.what());
  }
  check_numbers(parsed, what);
}

std::string dump(const nlohmann::json& json) {
  return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
}

void check_peaks(const memtrace::Analysis& a, const char* what) {
  for (const auto& [device, state] : a.model.devices()) {
    memtrace::DeviceTotals totals = state.totals();
    if (state.peak_allocated().bytes < totals.allocated_bytes)
      finding(std::string(what) + ": device " + std::to_string(device) + " peak allocated " +
              std::to_string(state.peak_allocated().bytes) + " < final allocated " +
              std::to_string(totals.allocated_bytes));
    if (state.peak_reserved().bytes < totals.reserved_bytes)
      finding(std::string(what) + ": device " + std::to_string(device) + " peak reserved " +
              std::to_string(state.peak_reserved().bytes) + " < final reserved " +
              std::to_string(totals.reserved_bytes));
  }
}

// As open_report (report_session.cc): --top, --all-frames, and the tracer's native depths.
memtrace::TextOptions text_options(const memtrace::Analysis& a, uint8_t flags) {
  memtrace::TextOptions options;
  if (unsigned top = flags >> memtrace::fuzz::kTopShift) options.top = top;
  options.all_frames = flags & memtrace::fuzz::kAllFrames;
  if (const auto& start = a.info.start;
      start && start->has_max_native_frames() && start->has_max_native_frames_python()) {
    options.max_native_frames = start->max_native_frames();
    options.max_native_frames_python = start->max_native_frames_python();
  }
  return options;
}

// A stage after the first analysis accepted the file: refusing it now is a finding too.
template <typename F>
auto accepted_stage(const char* what, F&& f) {
  try {
    return f();
  } catch (const memtrace::TraceError& e) {
    finding(std::string(what) + " refused a trace the analysis accepted: " + e.what());
  }
}

// What a report command opens (ReportSession, less the command line): the analysis, and the Symbolizer (without
// modules) and FrameResolver of its stacks.
struct Session {
  explicit Session(std::unique_ptr<memtrace::Analysis> analysis)
      : a(std::move(analysis)), symbolizer(std::vector<proto::Module>{}), resolver(a->stacks, symbolizer) {}
  std::unique_ptr<memtrace::Analysis> a;
  memtrace::Symbolizer symbolizer;
  memtrace::FrameResolver resolver;
};

// As the commands print a JSON report: terminal-safe, then checked.
void check_report_json(const nlohmann::json& report, const char* what) {
  check_json(memtrace::json_terminal_safe(report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + '\n',
             what);
}

// The breakdown's rows add up to the allocated total at the moment (peak_breakdown.h), and a peak's is the peak.
void check_breakdown(const memtrace::MomentBreakdown& b, const memtrace::Analysis& a, bool at_peak, const char* what) {
  uint64_t rows = 0;
  for (const memtrace::ByteCount& row : b.rows) rows += row.bytes;
  if (rows != b.totals.allocated_bytes)
    finding(std::string(what) + ": device " + std::to_string(b.device) + " breakdown rows add up to " +
            std::to_string(rows) + ", allocated at the moment is " + std::to_string(b.totals.allocated_bytes));
  const uint64_t peak_bytes = a.model.devices().at(b.device).peak_allocated().bytes;
  if (at_peak && b.totals.allocated_bytes != peak_bytes)
    finding(std::string(what) + ": device " + std::to_string(b.device) + " allocated at the peak's moment " +
            std::to_string(b.totals.allocated_bytes) + " != peak allocated " + std::to_string(peak_bytes));
}

// `summary A B` in process: the trace's summary (process_summary.h) beside a child of it (its pid + 1 with the
// trace's pid as ppid), grouped (fleet.h) and printed: the text terminal-safe, the JSON well formed, and the
// summary's JSON read back equal.
void run_fleet(Session& s, const memtrace::TextOptions& options) {
  memtrace::ProcessSummary process = memtrace::summarize_process(*s.a, s.resolver, options.top);
  if (memtrace::process_summary_from_json(memtrace::process_summary_json(process)) != process)
    finding("process_summary_json does not read back equal");
  memtrace::ProcessSummary child = process;
  child.ppid = process.pid;
  child.pid = process.pid + 1;
  const memtrace::FleetView view = memtrace::build_fleet({process, child});
  std::ostringstream out;
  memtrace::print_fleet(out, view, options.top);
  memtrace::print_process_leaks(out, view, options.top);
  check_text(out.str(), "summary of many");
  check_report_json(memtrace::fleet_json(view), "summary of many --json");
}

// cmd_summary, in process: the iteration analysis, the breakdown at each peak, then the reports.
void run_summary(Session& s, uint8_t flags) {
  const memtrace::Analysis& a = *s.a;
  memtrace::IterationReport iterations = accepted_stage(
      "analyze_iterations (summary)", [&] { return memtrace::analyze_iterations(a, s.resolver, a.nvtx_ranges); });
  std::map<int32_t, memtrace::MomentBreakdown> breakdowns = accepted_stage(
      "breakdowns_at_peaks (summary)", [&] { return memtrace::breakdowns_at_peaks(a, iterations.phases, s.resolver); });
  for (const auto& [device, b] : breakdowns) check_breakdown(b, a, /*at_peak=*/true, "summary's breakdown");
  nlohmann::json devices = memtrace::devices_json(a, s.resolver);
  for (nlohmann::json& entry : devices) {
    auto b = breakdowns.find(entry["device"].get<int32_t>());
    entry["peak_breakdown"] = b == breakdowns.end() ? nlohmann::json(nullptr) : memtrace::breakdown_json(b->second);
  }
  nlohmann::json report = {{"trace", memtrace::trace_json(a)},
                           {"devices", devices},
                           {"process", memtrace::process_json(a)},
                           {"iterations", memtrace::iterations_json(iterations, s.resolver)},
                           {"leaks", memtrace::leaks_json(a, s.resolver, &iterations)},
                           {"ooms", memtrace::ooms_json(a, s.resolver)}};
  memtrace::add_symbolizer_health(report["trace"], s.symbolizer);
  check_report_json(report, "summary --json");
  std::ostringstream out;
  memtrace::TextOptions options = text_options(a, flags);
  memtrace::print_trace_overview(out, a);
  memtrace::print_devices(out, a, s.resolver, options, [&](std::ostream& o, int32_t device) {
    if (auto b = breakdowns.find(device); b != breakdowns.end()) memtrace::print_breakdown_lines(o, b->second, "  ");
  });
  memtrace::print_process(out, a);
  memtrace::print_iterations(out, iterations, options);
  memtrace::print_traps(out, iterations);
  memtrace::print_leaks(out, a, s.resolver, options, &iterations);
  memtrace::print_ooms(out, a, s.resolver, options);
  memtrace::print_health(out, a, s.symbolizer.modules_not_opened());
  check_text(out.str(), "summary");
  run_fleet(s, options);
}

// cmd_report, in process: the HTML report's data as the page embeds it (embeddable_json): no '<' left in it, it
// parses back, and no integer in it is beyond JavaScript's exact ones (report_data clamps them to 2^53 - 1).
void run_report(Session& s) {
  const nlohmann::json data =
      accepted_stage("report_data", [&] { return memtrace::report_data(*s.a, s.resolver, &s.symbolizer); });
  const std::string embedded = memtrace::embeddable_json(data);
  if (embedded.find('<') != std::string::npos) finding("report: a '<' is left in the embedded data");
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(embedded);
  } catch (const nlohmann::json::exception& e) {
    finding(std::string("report: the embedded data does not parse: ") + e.what());
  }
  check_numbers(parsed, "report data");
  constexpr int64_t kMaxExact = (int64_t(1) << 53) - 1;
  std::vector<const nlohmann::json*> todo = {&parsed};
  while (!todo.empty()) {
    const nlohmann::json* j = todo.back();
    todo.pop_back();
    if (j->is_structured()) {
      for (const nlohmann::json& element : *j) todo.push_back(&element);
    } else if ((j->is_number_unsigned() && j->get<uint64_t>() > uint64_t(kMaxExact)) ||
               (j->is_number_integer() && !j->is_number_unsigned() &&
                (j->get<int64_t>() > kMaxExact || j->get<int64_t>() < -kMaxExact))) {
      finding("report data: " + j->dump() + " is beyond 2^53 - 1");
    }
  }
}

// cmd_leaks (with the iteration report) and cmd_oom, which share an analysis without live-at-peak.
void run_leaks_and_oom(Session& s, uint8_t flags) {
  const memtrace::Analysis& a = *s.a;
  memtrace::TextOptions options = text_options(a, flags);
  memtrace::IterationReport iterations = accepted_stage(
      "analyze_iterations (leaks)", [&] { return memtrace::analyze_iterations(a, s.resolver, a.nvtx_ranges); });
  nlohmann::json report = {{"trace", memtrace::trace_json(a)},
                           {"iterations", memtrace::iterations_json(iterations, s.resolver)},
                           {"leaks", memtrace::leaks_json(a, s.resolver, &iterations)}};
  memtrace::add_symbolizer_health(report["trace"], s.symbolizer);
  check_report_json(report, "leaks --json");
  std::ostringstream leaks;
  memtrace::print_trace_overview(leaks, a);
  memtrace::print_traps(leaks, iterations);
  memtrace::print_leaks(leaks, a, s.resolver, options, &iterations);
  check_text(leaks.str(), "leaks");

  size_t sites_per_oom = (flags >> memtrace::fuzz::kTopShift) ? options.top : memtrace::kSitesPerOom;
  memtrace::OomReport oom_report =
      accepted_stage("build_oom_report", [&] { return memtrace::build_oom_report(a, sites_per_oom); });
  check_json(dump(memtrace::oom_report_json(a, oom_report, s.resolver)), "oom --json");
  std::ostringstream oom;
  if (oom_report.total == 0) oom << "no failed allocation in " << a.path << '\n';
  else memtrace::print_oom_report(oom, a, oom_report, s.resolver, options);
  check_text(oom.str(), "oom");
}

// cmd_peak, in process (its choose_moments without --device): each device's peak allocated, or with `at_ns`
// (--at, in nanoseconds from trace start) the last event at or before it; text and --json, with the tree.
void run_peak(Session& s, uint8_t flags, std::optional<int64_t> at_ns) {
  const memtrace::Analysis& a = *s.a;
  const char* what = at_ns ? "peak --at" : "peak";
  std::vector<memtrace::Moment> moments;
  std::optional<uint64_t> at_event;
  if (at_ns) {
    if (*at_ns < 0 || *at_ns > a.duration_ns()) return;  // the command's error line: outside the trace
    at_event = accepted_stage("last_event_at_or_before",
                              [&] { return memtrace::last_event_at_or_before(a, *at_ns); })
                   .event;
    if (!at_event) return;  // the command's error line: before the trace's first event
  }
  for (const auto& [device, state] : a.model.devices())
    if (state.peak_allocated().bytes > 0)
      moments.push_back(at_event ? memtrace::Moment{device, *at_event}
                                 : memtrace::moment_of_peak(device, state.peak_allocated()));
  std::vector<memtrace::MomentBreakdown> breakdowns = accepted_stage(what, [&] {
    return memtrace::break_down_moments(a, moments, memtrace::event_phases_of(a, s.resolver), s.resolver);
  });
  for (const memtrace::MomentBreakdown& b : breakdowns) check_breakdown(b, a, !at_ns, what);
  memtrace::SiteGrouping grouping(a.stacks);
  memtrace::TextOptions options = text_options(a, flags);
  nlohmann::json peaks = nlohmann::json::array();
  for (const memtrace::MomentBreakdown& b : breakdowns)
    peaks.push_back(
        memtrace::peak_json(b, at_ns.has_value(), memtrace::live_tree(b.live, s.resolver, grouping), s.resolver));
  nlohmann::json report = {{"trace", memtrace::trace_json(a)}, {"peaks", peaks}};
  memtrace::add_symbolizer_health(report["trace"], s.symbolizer);
  check_report_json(report, at_ns ? "peak --at --json" : "peak --json");
  std::ostringstream out;
  memtrace::print_trace_overview(out, a);
  if (breakdowns.empty()) out << "\nNo device has allocated memory in this trace.\n";
  for (const memtrace::MomentBreakdown& b : breakdowns)
    memtrace::print_peak_report(out, b, memtrace::live_tree(b.live, s.resolver, grouping), at_ns.has_value(),
                                memtrace::began_at_attach(a), s.resolver, options);
  check_text(out.str(), what);
}

// cmd_diff's figures of one trace (opened with live at peak).
memtrace::TraceFigures figures_of(Session& s) {
  return accepted_stage("gather_trace_figures", [&] {
    memtrace::IterationReport iterations = memtrace::analyze_iterations(*s.a, s.resolver, s.a->nvtx_ranges);
    return memtrace::gather_trace_figures(*s.a, iterations,
                                          memtrace::breakdowns_at_peaks(*s.a, iterations.phases, s.resolver));
  });
}

// A diff of a trace against itself moves nothing: every site matched and unchanged, every device's figures equal.
void check_no_change(const memtrace::DiffResult& d) {
  std::string why;
  if (d.changed_sites != 0) why = std::to_string(d.changed_sites) + " changed sites";
  else if (d.matched_sites != d.sites.size() || d.sites_before != d.sites_after)
    why = "sites matched " + std::to_string(d.matched_sites) + " of " + std::to_string(d.sites.size()) + " (before " +
          std::to_string(d.sites_before) + ", after " + std::to_string(d.sites_after) + ")";
  else if (!d.same_program || !d.same_devices) why = "not the same program or devices";
  else if (d.iterations_before != d.iterations_after) why = "iterations differ";
  for (const memtrace::DeviceChange& c : d.devices) {
    if (!why.empty()) break;
    const std::string device = "device " + std::to_string(c.device) + ": ";
    if (!c.before || !c.after) why = device + "on one side only";
    else if (c.peak_allocated_change_bytes != 0 || c.before->peak_allocated_bytes != c.after->peak_allocated_bytes)
      why = device + "peak allocated changed by " + std::to_string(c.peak_allocated_change_bytes);
    else if (c.growth_per_iteration_change_bytes.value_or(0) != 0)
      why = device + "growth per iteration changed by " + std::to_string(*c.growth_per_iteration_change_bytes);
    else if (c.other_gpu) why = device + "another GPU";
    for (const memtrace::CategoryChange& category : c.categories)
      if (why.empty() && (category.change_bytes.value_or(0) != 0 || category.before_bytes != category.after_bytes))
        why = device + category.name + " changed by " + std::to_string(category.change_bytes.value_or(0));
  }
  if (!why.empty()) finding("diff of the trace against itself reports a change: " + why);
}

// cmd_diff, in process: BEFORE's figures against AFTER's, text and --json.
void run_diff(Session& before, const memtrace::TraceFigures& before_figures, Session& after, uint8_t flags,
              bool same_trace) {
  const memtrace::TraceFigures after_figures = figures_of(after);
  const memtrace::DiffResult result = memtrace::diff(before_figures, after_figures);
  if (same_trace) check_no_change(result);
  check_report_json(memtrace::diff_json(*before.a, before.resolver, before.symbolizer, *after.a, after.resolver,
                                        after.symbolizer, result),
                    same_trace ? "diff --json (itself)" : "diff --json (last chunk dropped)");
  std::ostringstream out;
  memtrace::print_diff(out, {*before.a, before.resolver}, {*after.a, after.resolver}, result,
                       text_options(*after.a, flags));
  check_text(out.str(), same_trace ? "diff (itself)" : "diff (last chunk dropped)");
}

// Points std::cout and std::cerr elsewhere for its lifetime (the commands run by run_memtrace write to them).
class RedirectStdStreams {
 public:
  RedirectStdStreams(std::ostream& out, std::ostream& err)
      : cout_(std::cout.rdbuf(out.rdbuf())), cerr_(std::cerr.rdbuf(err.rdbuf())) {}
  ~RedirectStdStreams() {
    std::cout.rdbuf(cout_);
    std::cerr.rdbuf(cerr_);
  }

 private:
  std::streambuf* cout_;
  std::streambuf* cerr_;
};

// `memtrace timeline`, through the command line as main() runs it.
void run_timeline(bool json, const char* interval) {
  std::vector<std::string> args = {"timeline", input_path(), json ? "--json" : "--csv"};
  if (interval) args.insert(args.end(), {"--interval", interval});
  std::ostringstream out, err;
  int status;
  {
    RedirectStdStreams redirect(out, err);
    status = memtrace::run_memtrace(args);
  }
  std::string what = std::string("timeline ") + args[2] + (interval ? std::string(" --interval ") + interval : "");
  if (status != memtrace::kExitOk) finding(what + " refused a trace the analysis accepted: " + err.str());
  if (json) check_json(out.str(), what.c_str());
  check_text(out.str(), what.c_str());
}

// `memtrace dump [--frames]`: every line is one JSON object, and terminal-safe.
void run_dump(bool frames) {
  const char* what = frames ? "dump --frames" : "dump";
  std::ostringstream out;
  memtrace::DumpOptions options;
  options.frames = frames;
  accepted_stage(what, [&] { return memtrace::dump_records(input_path(), options, out); });
  const std::string text = out.str();
  check_text(text, what);
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) finding(std::string(what) + ": the output does not end with a newline");
    nlohmann::json line;
    try {
      line = nlohmann::json::parse(text.substr(begin, end - begin));
    } catch (const nlohmann::json::exception& e) {
      finding(std::string(what) + ": a line does not parse as JSON: " + e.what());
    }
    if (!line.is_object() || !line.contains("record")) finding(std::string(what) + ": a line is not a record object");
    begin = end + 1;
  }
}

// `memtrace export --format perfetto`: the output decodes, and on every track its slices nest (an END closes an open
// BEGIN, both in time order) and every event is on a declared track.
void check_perfetto(const std::string& bytes) {
  memtrace::perfetto_proto::Trace trace;
  if (!trace.ParseFromString(bytes)) finding("export perfetto: the output does not decode as a Perfetto Trace");
  std::map<uint64_t, std::pair<int64_t, uint64_t>> slice_tracks;  // uuid -> (open slices, last time)
  std::map<uint64_t, bool> declared;
  for (const auto& p : trace.packet()) {
    if (p.has_track_descriptor()) {
      declared[p.track_descriptor().uuid()] = true;
      continue;
    }
    const auto& e = p.track_event();
    if (!declared.count(e.track_uuid())) finding("export perfetto: an event on a track not declared before it");
    if (e.type() == memtrace::perfetto_proto::TrackEvent::TYPE_COUNTER) continue;
    auto& [open, last] = slice_tracks[e.track_uuid()];
    if (p.timestamp() < last) finding("export perfetto: a slice track's times go back");
    last = p.timestamp();
    if (e.type() == memtrace::perfetto_proto::TrackEvent::TYPE_SLICE_BEGIN) ++open;
    if (e.type() == memtrace::perfetto_proto::TrackEvent::TYPE_SLICE_END && --open < 0)
      finding("export perfetto: a slice ends that never began");
  }
  for (const auto& [uuid, track] : slice_tracks)
    if (track.first != 0) finding("export perfetto: a slice never ends");
}

// `memtrace export --format pprof`: the output is gzip, decodes as a Profile, and every sample has a value per
// sample type and names locations that exist, each naming a function that exists.
void check_pprof(const std::string& gzipped) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) std::abort();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gzipped.data()));
  z.avail_in = uInt(gzipped.size());
  std::string bytes;
  char buffer[1 << 14];
  int status;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    bytes.append(buffer, sizeof buffer - z.avail_out);
  } while (status == Z_OK);
  inflateEnd(&z);
  if (status != Z_STREAM_END) finding("export pprof: the output is not gzip");
  memtrace::pprof_proto::Profile profile;
  if (!profile.ParseFromString(bytes)) finding("export pprof: the output does not decode as a Profile");
  if (profile.string_table_size() == 0 || !profile.string_table(0).empty())
    finding("export pprof: string_table[0] is not \"\"");
  for (const auto& sample : profile.sample()) {
    if (sample.value_size() != profile.sample_type_size()) finding("export pprof: a sample's values do not match");
    for (uint64_t id : sample.location_id())
      if (id == 0 || id > uint64_t(profile.location_size()) || profile.location(int(id - 1)).id() != id)
        finding("export pprof: a sample names a location that does not exist");
  }
  for (const auto& location : profile.location())
    for (const auto& line : location.line())
      if (line.function_id() == 0 || line.function_id() > uint64_t(profile.function_size()))
        finding("export pprof: a location names a function that does not exist");
}

// `memtrace export --format memory-viz`: the pickle starts with PROTO 4 and ends with STOP; the JSON parses, and each
// segment's blocks tile it (what `python -m torch.cuda._memory_viz stats` asserts).
void check_memory_viz(const std::string& pickle, const std::string& json_text) {
  if (pickle.size() < 3 || pickle.compare(0, 2, "\x80\x04") != 0 || pickle.back() != '.')
    finding("export memory-viz: the pickle does not begin with PROTO 4 and end with STOP");
  nlohmann::json snapshot;
  try {
    snapshot = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    finding(std::string("export memory-viz: the JSON does not parse: ") + e.what());
  }
  for (const auto& segment : snapshot.at("segments")) {
    uint64_t address = segment.at("address").get<uint64_t>();
    for (const auto& block : segment.at("blocks")) {
      if (block.at("address").get<uint64_t>() != address) finding("export memory-viz: a segment's blocks leave a gap");
      address += block.at("size").get<uint64_t>();
    }
    if (address - segment.at("address").get<uint64_t>() != segment.at("total_size").get<uint64_t>())
      finding("export memory-viz: a segment's blocks do not add up to its size");
  }
}

// The one row `sql` returns from the database at `path`, its columns joined by '|' ("" for no row).
std::string sqlite_row(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    finding("export sqlite: the database does not open");
  }
  std::string row;
  auto first_row = [](void* out, int columns, char** values, char**) {
    std::string& text = *static_cast<std::string*>(out);
    for (int i = 0; i < columns; ++i) text += std::string(i ? "|" : "") + (values[i] ? values[i] : "NULL");
    return 1;  // one row is enough: stop
  };
  const int status = sqlite3_exec(db, sql, first_row, &row, nullptr);
  sqlite3_close(db);
  if (status != SQLITE_OK && status != SQLITE_ABORT) finding(std::string("export sqlite: query failed: ") + sql);
  return row;
}

// `memtrace export --format sqlite`, into a temporary file (SQLite resolves a symlink before it opens a database, so
// an in-memory file's /proc/self/fd path would make it create the memfd's "(deleted)" name): the database is whole,
// holds one process with as many event rows as its row says, and every frame a stack names is in frames.
void run_sqlite_export(const memtrace::ExportSource& source) {
  const char* tmp = std::getenv("TMPDIR");
  static const std::string path =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/memtrace-fuzz-pipeline-" + std::to_string(getpid()) + ".sqlite";
  std::remove(path.c_str());  // a new database each time
  accepted_stage("export sqlite", [&] {
    memtrace::SqliteExport out(path);
    out.add_trace(source);
    out.finish();
    return 0;
  });
  if (sqlite_row(path, "PRAGMA integrity_check") != "ok")
    finding("export sqlite: the database fails its integrity check");
  if (sqlite_row(path, "SELECT COUNT(*), (SELECT COUNT(*) FROM events) = events FROM processes") != "1|1")
    finding("export sqlite: the events table does not hold the process's events");
  if (sqlite_row(path, "SELECT COUNT(*) FROM stacks WHERE frame_id NOT IN (SELECT frame_id FROM frames)") != "0")
    finding("export sqlite: a stack names a frame that is not in frames");
  std::remove(path.c_str());
}

void run_exports() {
  Session s(accepted_stage("analysis (export)", [] { return memtrace::analyze_trace(input_path(), true); }));
  memtrace::ExportSource source(*s.a, s.resolver, [&] { return memtrace::event_phases_of(*s.a, s.resolver); });
  std::ostringstream perfetto, pprof;
  accepted_stage("export perfetto", [&] {
    memtrace::write_perfetto(source, perfetto);
    return 0;
  });
  check_perfetto(perfetto.str());
  accepted_stage("export pprof", [&] {
    memtrace::write_pprof(source, pprof);
    return 0;
  });
  check_pprof(pprof.str());
  std::ostringstream memory_viz_pickle, memory_viz_json;
  accepted_stage("export memory-viz", [&] {
    memtrace::write_memory_viz_as(source, memory_viz_pickle, false);
    memtrace::write_memory_viz_as(source, memory_viz_json, true);
    return 0;
  });
  check_memory_viz(memory_viz_pickle.str(), memory_viz_json.str());
  run_sqlite_export(source);
}

// MEMTRACE_FUZZ_TIMING=1: each stage's time on stderr (to tell which command a slow input is slow in).
class StageTimer {
 public:
  void stage(const char* name) {
    static const bool enabled = env_switch("MEMTRACE_FUZZ_TIMING", false);
    auto now = std::chrono::steady_clock::now();
    if (enabled && name_)
      std::fprintf(stderr, "fuzz_pipeline: %-28s %8.1f ms\n", name_,
                   std::chrono::duration<double, std::milli>(now - start_).count());
    name_ = name;
    start_ = now;
  }
  ~StageTimer() { stage(nullptr); }

 private:
  const char* name_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

// `in`'s trace is in mem_file(0).
void run_pipeline(const PipelineInput& in) {
  const uint8_t flags = in.raw ? 0 : in.flags;
  StageTimer timer;
  timer.stage("analysis (live at peak)");
  std::unique_ptr<memtrace::Analysis> with_peak;
  try {
    with_peak = memtrace::analyze_trace(input_path(), /*with_live_at_peak=*/true);
  } catch (const memtrace::TraceError&) {
    return;  // the expected outcome for a damaged file (one error line, exit 2)
  }
  check_peaks(*with_peak, "analysis (with live at peak)");
  wrap_check_applies = accepted_stage("read_trace", stated_bytes_bound) <= (uint64_t(1) << 63);
  timer.stage("summary, summary --json");
  Session summary(std::move(with_peak));
  run_summary(summary, flags);
  timer.stage("report (the HTML report's data)");
  run_report(summary);
  {
    // diff opens each trace with live at peak, as summary does: summary's analysis is BEFORE (a new session, as
    // the command's), the trace again and the trace less its last chunk are AFTER.
    timer.stage("diff itself");
    Session before(std::move(summary.a));
    const memtrace::TraceFigures before_figures = figures_of(before);
    {
      Session again(accepted_stage("analysis (diff)", [] { return memtrace::analyze_trace(input_path(), true); }));
      run_diff(before, before_figures, again, flags, /*same_trace=*/true);
    }
    if (!in.raw) {
      timer.stage("diff, last chunk dropped");
      PipelineInput shorter = in;
      if (!shorter.chunks.empty()) shorter.chunks.pop_back();
      mem_file(1).write(memtrace::fuzz::trace_file(shorter));
      std::unique_ptr<memtrace::Analysis> analysis;
      try {
        analysis = memtrace::analyze_trace(mem_file(1).path(), true);
      } catch (const memtrace::TraceError&) {
        analysis.reset();  // diff's one error line naming AFTER, exit 2
      }
      if (analysis) {
        Session after(std::move(analysis));
        check_peaks(*after.a, "analysis (last chunk dropped)");
        run_diff(before, before_figures, after, flags, /*same_trace=*/false);
      }
    }
  }
  timer.stage("analysis");
  Session without_peak(
      accepted_stage("analysis without live at peak", [] { return memtrace::analyze_trace(input_path(), false); }));
  check_peaks(*without_peak.a, "analysis");
  timer.stage("leaks, oom (text, --json)");
  run_leaks_and_oom(without_peak, flags);
  timer.stage("peak (text, --json)");
  run_peak(without_peak, flags, std::nullopt);
  // --at: a time chosen by the interval bits, from the trace's start to its end.
  static const double kAtFractions[] = {0.0, 0.25, 0.5, 1.0};
  timer.stage("peak --at (text, --json)");
  run_peak(without_peak, flags,
           int64_t(double(without_peak.a->duration_ns()) * kAtFractions[(flags >> memtrace::fuzz::kIntervalShift) & 3]));
  without_peak.a.reset();
  static const char* const kIntervals[] = {"0.000001", "0.001", "0.5", "1000000000"};
  const char* interval = kIntervals[(flags >> memtrace::fuzz::kIntervalShift) & 3];
  for (bool json : {false, true}) {
    timer.stage(json ? "timeline --json" : "timeline --csv");
    run_timeline(json, nullptr);
    timer.stage(json ? "timeline --json --interval" : "timeline --csv --interval");
    run_timeline(json, interval);
  }
  for (bool frames : {false, true}) {
    timer.stage(frames ? "dump --frames" : "dump");
    run_dump(frames);
  }
  timer.stage("export perfetto, pprof, memory-viz, sqlite");
  run_exports();
}

// ---------------------------------------------------------------------------------------------------
// The mutator
// ---------------------------------------------------------------------------------------------------

enum Mutation {
  kFieldInteresting,
  kFieldCopied,
  kFieldCleared,
  kDuplicateRecord,
  kDeleteRecord,
  kSwapRecords,
  kMoveRecord,
  kInsertRecord,
  kBlowUpString,
  kBlowUpStack,
  kSplitChunk,
  kMergeChunks,
  kChangeVersion,
  kFlipFlag,
  kToRawFile,
  kBytesOfRecord,
  kBytesOfInput,
  kCrossOver,
  kMutationCount
};
const char* const kMutationNames[kMutationCount] = {"field_interesting", "field_copied",   "field_cleared",
                                                    "duplicate_record",  "delete_record",  "swap_records",
                                                    "move_record",       "insert_record",  "blow_up_string",
                                                    "blow_up_stack",     "split_chunk",    "merge_chunks",
                                                    "change_version",    "flip_flag",      "to_raw_file",
                                                    "bytes_of_record",   "bytes_of_input", "cross_over"};

// Kinds of inserted records: Event of each EventKind (0..14, 15 = an unknown kind), then the others.
enum InsertKind {
  kInsertEventFirst = 0,
  kInsertEventLast = 15,
  kInsertStack,
  kInsertModule,
  kInsertPythonFrame,
  kInsertNotice,
  kInsertEnd,
  kInsertStart,
  kInsertThread,
  kInsertRangeName,
  kInsertRangeEvent,
  kInsertNvmlProcesses,
  kInsertKindCount
};

struct Stats {
  std::array<uint64_t, kMutationCount> mutations{};
  std::array<uint64_t, kInsertKindCount> inserts{};
  uint64_t fallbacks = 0;  // a structured mutation did not fit max_size: bytes of the input instead
};
Stats& stats() {
  static Stats s;
  return s;
}
void print_stats() {
  std::fprintf(stderr, "fuzz_pipeline mutator stats:\n");
  for (int i = 0; i < kMutationCount; ++i)
    std::fprintf(stderr, "  %-18s %llu\n", kMutationNames[i], (unsigned long long)stats().mutations[i]);
  static const char* const kOthers[] = {"stack", "module", "python_frame", "notice", "end", "start", "thread",
                                              "range_name", "range_event", "nvml_processes"};
  for (int i = 0; i < kInsertKindCount; ++i) {
    std::string kind = i <= kInsertEventLast ? "event kind " + std::to_string(i) : kOthers[i - kInsertStack];
    std::fprintf(stderr, "  insert %-16s %llu\n", kind.c_str(), (unsigned long long)stats().inserts[i]);
  }
  std::fprintf(stderr, "  fallbacks          %llu\n", (unsigned long long)stats().fallbacks);
}
// At exit, and every 1000 mutations (a finding ends the process without running atexit handlers).
void count(Mutation m) {
  static const bool enabled = [] {
    bool on = env_switch("MEMTRACE_FUZZ_MUTATOR_STATS", false);
    if (on) std::atexit(print_stats);
    return on;
  }();
  ++stats().mutations[m];
  static uint64_t total = 0;
  if (enabled && ++total % 1000 == 0) print_stats();
}

// Classes of values, so that a copied value lands where it means something (a stack id in stack_id).
enum ValueClass { kAddress, kStackId, kPythonId, kSize, kDevice, kTid, kTime, kOther, kClassCount };

const uint64_t kInteresting[] = {0,
                                 1,
                                 2,
                                 3,
                                 4,
                                 7,
                                 8,
                                 16,
                                 64,
                                 127,
                                 128,
                                 255,
                                 256,
                                 512,
                                 1000,
                                 1024,
                                 4096,
                                 65535,
                                 65536,
                                 1u << 20,
                                 2u << 20,
                                 1u << 30,
                                 0x7fffffff,
                                 0x80000000,
                                 0xffffffff,
                                 1ull << 32,
                                 (1ull << 32) + 1,
                                 1000000000,
                                 1ull << 40,
                                 141ull << 30,
                                 1000000000000000000ull,
                                 (1ull << 62),
                                 (1ull << 63) - 1,
                                 1ull << 63,
                                 (1ull << 63) + 1,
                                 UINT64_MAX - 1,
                                 UINT64_MAX,
                                 uint64_t(int64_t(INT32_MIN)),
                                 uint64_t(int64_t(-2)),
                                 0x7f0000000000ull,
                                 0x7f0000001000ull};

const int32_t kApis[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,  18,  19,
                         20, 21, 22, 23, 24, 25, 26, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,  41,  42,
                         43, 44, 45, 46, 47, 48, 49, 50, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69,  70,  71,
                         72, 73, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 100, 101, 255};

class Mutator {
 public:
  Mutator(unsigned seed, size_t max_size) : rng_(seed), max_size_(max_size) {}

  uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }
  bool chance(unsigned percent) { return below(100) < percent; }

  // Parses `in`'s records for the value pools.
  void learn(const PipelineInput& in) {
    for (const Chunk& chunk : in.chunks)
      for (const std::string& bytes : chunk.records) {
        proto::Record r;
        if (r.ParseFromString(bytes)) learn(r);
      }
  }

  uint64_t interesting() {
    uint64_t v = kInteresting[below(std::size(kInteresting))];
    if (chance(20)) {  // a power of two, or one off it
      v = uint64_t(1) << below(64);
      v += below(3) - 1;
    }
    return v;
  }

  uint64_t value(ValueClass cls) {
    unsigned roll = unsigned(below(100));
    if (roll < 45 && !pools_[cls].empty()) return pools_[cls][below(pools_[cls].size())];
    if (roll < 55) {
      ValueClass other = ValueClass(below(kClassCount));
      if (!pools_[other].empty()) return pools_[other][below(pools_[other].size())];
    }
    if (roll < 65) {
      switch (cls) {
        case kDevice: return uint64_t(int64_t(below(10)) - 1);
        case kTime: return below(2000000);
        case kSize: return (below(1 << 16) + 1) * 512;
        case kAddress: return 0x7f0000000000ull + below(1 << 24) * 512;
        default: return below(1000);
      }
    }
    return interesting();
  }

  // Mutates one record of `bytes` (false: nothing this mutation applies to in it).
  bool mutate_field(std::string* bytes, Mutation how) {
    proto::Record r;
    if (!r.ParseFromString(*bytes)) return false;
    bool changed = false;
    switch (r.kind_case()) {
      case proto::Record::kEvent: changed = mutate_event(r.mutable_event(), how); break;
      case proto::Record::kStack: changed = mutate_stack(r.mutable_stack(), how); break;
      case proto::Record::kModule: changed = mutate_module(r.mutable_module(), how); break;
      case proto::Record::kPythonFrame: changed = mutate_python_frame(r.mutable_python_frame(), how); break;
      case proto::Record::kStart: changed = mutate_start(r.mutable_start(), how); break;
      case proto::Record::kEnd: changed = mutate_end(r.mutable_end(), how); break;
      case proto::Record::kNotice: changed = mutate_notice(r.mutable_notice(), how); break;
      case proto::Record::kThread: changed = mutate_thread(r.mutable_thread(), how); break;
      case proto::Record::kRangeName: changed = mutate_range_name(r.mutable_range_name(), how); break;
      case proto::Record::kRangeEvent: changed = mutate_range_event(r.mutable_range_event(), how); break;
      case proto::Record::kNvmlProcesses: changed = mutate_nvml_processes(r.mutable_nvml_processes(), how); break;
      case proto::Record::kLiveAtAttach: changed = mutate_live_at_attach(r.mutable_live_at_attach(), how); break;
      case proto::Record::kAttachBaseline: changed = mutate_attach_baseline(r.mutable_attach_baseline(), how); break;
      default: return false;
    }
    if (changed) *bytes = r.SerializeAsString();
    return changed;
  }

  // A record of `kind` (InsertKind) with plausible fields, values drawn from the pools.
  std::string new_record(int kind) {
    proto::Record r;
    if (kind <= kInsertEventLast) {
      proto::Event* e = r.mutable_event();
      e->set_kind(proto::EventKind(kind));
      e->set_api(proto::Api(kApis[below(std::size(kApis))]));
      e->set_layer(proto::Layer(below(3)));
      e->set_device(int32_t(chance(85) ? value(kDevice) : interesting()));
      if (chance(70)) e->set_tid(uint32_t(value(kTid)));
      if (chance(50)) e->set_stream(value(kAddress));
      if (chance(50)) e->set_time_delta_us(int64_t(below(100000)));
      else e->set_time_delta_ns(int64_t(value(kTime)));
      e->set_address(value(kAddress));
      e->set_size(value(kSize));
      if (chance(60)) e->set_stack_id(value(kStackId));
      if (chance(10)) e->set_result(int32_t(chance(50) ? 4 : interesting()));
      if (chance(30)) e->set_memory(proto::Memory(below(7)));
      if (chance(30) || kind >= proto::GRAPH_CAPTURED) e->set_graph(value(kAddress));
      if (chance(20)) e->set_capture_id(value(kAddress));
      if (chance(20) || kind == proto::MAP) e->set_handle(value(kAddress));
      if (chance(20) || kind == proto::CONTEXT_DESTROY) e->set_context(value(kAddress));
      if (e->api() == proto::TORCH_ALLOCATOR || chance(10)) {
        e->set_allocator_allocated_bytes(value(kSize));
        e->set_allocator_reserved_bytes(value(kSize));
      }
      if (kind == proto::OOM || kind == proto::DEVICE_USAGE || chance(10)) {
        e->set_device_total_bytes(chance(70) ? 150754820096ull : value(kSize));
        e->set_device_free_bytes(value(kSize));
        if (chance(60)) e->set_process_used_bytes(value(kSize));
        if (chance(60)) e->set_other_processes_used_bytes(value(kSize));
      }
    } else if (kind == kInsertStack) {
      proto::Stack* s = r.mutable_stack();
      s->set_id(chance(70) ? next_id() : value(kStackId));
      for (uint64_t n = below(12) + 1; n > 0; --n) s->add_frames(frame());
      if (chance(15)) s->set_native_frames_cut(true);
      if (chance(15)) s->set_python_frames_cut(true);
      if (chance(15)) s->set_python_frames_from_backward(true);
    } else if (kind == kInsertModule) {
      proto::Module* m = r.mutable_module();
      uint64_t base = value(kAddress) & ~uint64_t(0xfff);
      m->set_path(chance(50) ? "/usr/lib/libtorch_cuda.so" : "/opt/" + std::to_string(below(100)) + ".so");
      m->set_load_address(base);
      m->set_start(base + (chance(80) ? 0x1000 : value(kSize)));
      m->set_end(m->start() + (chance(80) ? below(1 << 24) : value(kSize)));
      if (chance(50)) m->set_build_id(std::string(20, char(below(256))));
    } else if (kind == kInsertPythonFrame) {
      proto::PythonFrame* f = r.mutable_python_frame();
      f->set_id(chance(70) ? next_id() : value(kPythonId));
      f->set_file(chance(50) ? "train.py" : "/usr/lib/python3/torch/nn/" + std::to_string(below(50)) + ".py");
      f->set_function(chance(50) ? "forward" : "<module>");
      f->set_line(uint32_t(below(5000)));
    } else if (kind == kInsertNotice) {
      proto::Notice* n = r.mutable_notice();
      n->set_code(proto::Notice_Code(below(7)));
      n->set_message("notice " + std::to_string(below(100)));
      n->set_count(value(kOther));
    } else if (kind == kInsertEnd) {
      proto::TraceEnd* end = r.mutable_end();
      end->set_events(value(kOther));
      if (chance(30)) end->set_dropped_events(value(kOther));
      end->set_time_delta_us(int64_t(below(1000000)));
      end->set_how(proto::TraceEnd_How(below(5)));
      if (end->how() == proto::TraceEnd::SIGNAL || chance(10)) end->set_signal(int32_t(below(70)));
    } else if (kind == kInsertStart) {
      proto::TraceStart* s = r.mutable_start();
      s->set_pid(uint32_t(value(kTid)));
      s->set_ppid(1);
      s->set_hostname("host");
      s->add_argv("python3");
      s->add_argv("train.py");
      s->set_start_monotonic_ns(value(kTime));
      s->set_start_unix_ns(1700000000000000000ull + below(1ull << 40));
      s->set_tracer_version("0.1");
      s->set_flush_interval_ms(1000);
      if (chance(50)) s->set_python_frames(0x30b00f0);
      if (chance(50)) {
        s->set_max_native_frames(uint32_t(below(400)));
        s->set_max_native_frames_python(uint32_t(below(400)));
      }
    } else if (kind == kInsertRangeName) {
      proto::RangeName* n = r.mutable_range_name();
      n->set_id(below(8));
      n->set_name(chance(50) ? "step" : "forward");
    } else if (kind == kInsertRangeEvent) {
      // Ids and range ids from a small set, so that pushes meet pops, starts meet ends and names resolve.
      proto::RangeEvent* e = r.mutable_range_event();
      e->set_kind(proto::RangeEvent_Kind(below(7)));
      e->set_name_id(below(8));
      e->set_tid(uint32_t(chance(80) ? value(kTid) : interesting()));
      e->set_time_us(chance(80) ? below(2000000) : interesting());
      e->set_range_id(chance(80) ? below(4) : interesting());
    } else if (kind == kInsertNvmlProcesses) {
      // Pids from the tid pool (other processes' pids look alike), some repeated across records, a few absent figures.
      proto::NvmlProcesses* list = r.mutable_nvml_processes();
      list->set_device(uint32_t(chance(85) ? below(4) : interesting()));
      for (uint64_t i = 0, n = below(5); i < n; i++) {
        proto::NvmlProcess* p = list->add_processes();
        p->set_pid(uint32_t(value(kTid)));
        if (chance(80)) p->set_used_bytes(value(kSize));
      }
    } else {
      proto::ThreadInfo* t = r.mutable_thread();
      t->set_tid(uint32_t(value(kTid)));
      t->set_name(chance(50) ? "pt_autograd_0" : "worker");
    }
    learn(r);
    return r.SerializeAsString();
  }

  // A long string of `n` bytes (mostly printable) with control characters, escape sequences, invalid UTF-8.
  std::string hostile_string(size_t n) {
    static const char* const kPieces[] = {"\x1b]0;title\x07",
                                          "\x1b[2J",
                                          "\x1b[31m",
                                          "\r",
                                          "\n",
                                          "\t",
                                          "\x7f",
                                          "\x08",
                                          "" /* a NUL byte */,
                                          "\xff",
                                          "\xc3",
                                          "\xc0\x80",
                                          "\xed\xa0\x80",
                                          "\xf4\x90\x80\x80",
                                          "\xe2\x80\xae",
                                          "%s%n",
                                          "\\",
                                          "\"",
                                          "(",
                                          "[",
                                          ".*",
                                          "+0x",
                                          "::",
                                          "/"};
    std::string s;
    char filler = char('a' + below(26));
    while (s.size() < n) {
      if (chance(3)) {
        const char* piece = kPieces[below(std::size(kPieces))];
        s += *piece ? std::string(piece) : std::string(1, '\0');
      } else {
        s.append(std::min<size_t>(n - s.size(), below(64) + 1), chance(90) ? filler : char(below(256)));
      }
    }
    s.resize(n);
    return s;
  }

  // A length for a blown-up string or stack: mostly tens of KiB, bounded by what the input has room for.
  // Half of them at most 4 KiB, a tenth 200 KB or more: each blown-up input costs seconds per run.
  size_t big_length(size_t room) {
    static const size_t kLengths[] = {1, 100, 1000, 4096, 4096, 20000, 20000, 65536, 200000, 1000000};
    size_t n = kLengths[below(std::size(kLengths))];
    if (n >= 200000 && chance(50)) n = 65536;
    return std::min(n, room);
  }

  // Sets one string of `r` to a hostile one. False: `r` has no string.
  bool blow_up_string(proto::Record* r, size_t room) {
    size_t n = chance(30) ? below(40) + 1 : big_length(room);
    std::string s = hostile_string(n);
    if (chance(30)) s = hostile_string(below(16) + 1);  // short: one escape in an ordinary name
    switch (r->kind_case()) {
      case proto::Record::kModule: r->mutable_module()->set_path(chance(50) ? "/lib/" + s + ".so" : s); return true;
      case proto::Record::kPythonFrame:
        if (chance(50)) r->mutable_python_frame()->set_file(s);
        else r->mutable_python_frame()->set_function(s);
        return true;
      case proto::Record::kStart:
        switch (below(3)) {
          case 0: r->mutable_start()->set_hostname(s); break;
          case 1: r->mutable_start()->set_tracer_version(s); break;
          default: r->mutable_start()->add_argv(s); break;
        }
        return true;
      case proto::Record::kNotice: r->mutable_notice()->set_message(s); return true;
      case proto::Record::kThread: r->mutable_thread()->set_name(s); return true;
      case proto::Record::kRangeName: r->mutable_range_name()->set_name(s); return true;
      default: return false;
    }
  }

  // Sets a Stack's frames to a deep list (some Python frames). `room`: bytes the record may take.
  // MEMTRACE_FUZZ_MAX_STACK_FRAMES=N caps the depth (to fuzz on past a known slowness with deep stacks).
  void blow_up_stack(proto::Stack* s, size_t room) {
    static const size_t max_frames = [] {
      const char* v = std::getenv("MEMTRACE_FUZZ_MAX_STACK_FRAMES");
      return v && *v ? size_t(std::strtoull(v, nullptr, 10)) : SIZE_MAX;
    }();
    size_t n = std::min<size_t>(big_length(room), room / 2);
    static const size_t kDepths[] = {129, 385, 1000, 10000, 100000, 1000000};
    n = std::min({n, kDepths[below(std::size(kDepths))], max_frames});
    s->clear_frames();
    bool python = chance(50) && !pools_[kPythonId].empty();
    size_t budget = room;
    for (size_t i = 0; i < n; ++i) {
      uint64_t f;
      if (python && chance(20) && budget > 20) {
        f = (uint64_t(1) << 63) | pools_[kPythonId][below(pools_[kPythonId].size())];
        budget -= 10;
      } else if (budget > 20 && chance(50) && !pools_[kAddress].empty()) {
        f = pools_[kAddress][below(pools_[kAddress].size())];
        budget -= 10;
      } else {
        f = below(127) + 1;  // one byte: deep stacks stay small
        budget -= 1;
      }
      s->add_frames(f);
      if (budget < 2) break;
    }
  }

  std::mt19937_64& rng() { return rng_; }
  size_t max_size() const { return max_size_; }

 private:
  void add(ValueClass cls, uint64_t v) {
    if (v != 0 && pools_[cls].size() < 256) pools_[cls].push_back(v);
  }
  void learn(const proto::Record& r) {
    switch (r.kind_case()) {
      case proto::Record::kEvent: {
        const proto::Event& e = r.event();
        add(kAddress, e.address());
        add(kAddress, e.handle());
        add(kAddress, e.graph());
        add(kAddress, e.capture_id());
        add(kAddress, e.context());
        add(kAddress, e.stream());
        add(kStackId, e.stack_id());
        add(kSize, e.size());
        add(kDevice, uint64_t(int64_t(e.device())));
        add(kTid, e.tid());
        add(kTime, uint64_t(e.time_delta_ns()));
        break;
      }
      case proto::Record::kStack:
        add(kStackId, r.stack().id());
        max_id_ = std::max(max_id_, r.stack().id());
        for (int i = 0; i < std::min(r.stack().frames_size(), 4); ++i)
          add(kAddress, r.stack().frames(i) & ~(uint64_t(1) << 63));
        break;
      case proto::Record::kModule:
        add(kAddress, r.module().load_address());
        add(kAddress, r.module().start() + 0x10);
        add(kAddress, r.module().end() - 1);
        break;
      case proto::Record::kPythonFrame:
        add(kPythonId, r.python_frame().id());
        max_id_ = std::max(max_id_, r.python_frame().id());
        break;
      case proto::Record::kThread: add(kTid, r.thread().tid()); break;
      case proto::Record::kRangeEvent: add(kTid, r.range_event().tid()); break;
      case proto::Record::kNvmlProcesses:
        for (const proto::NvmlProcess& p : r.nvml_processes().processes()) add(kTid, p.pid());
        break;
      case proto::Record::kStart: add(kTime, r.start().start_monotonic_ns()); break;
      default: break;
    }
  }
  uint64_t next_id() { return ++max_id_; }
  uint64_t frame() {
    if (!pools_[kPythonId].empty() && chance(30))
      return (uint64_t(1) << 63) | pools_[kPythonId][below(pools_[kPythonId].size())];
    return value(kAddress);
  }

  // The value a field mutation sets: interesting, copied from the pool of `cls`, or (kFieldCleared) none.
  uint64_t pick(Mutation how, ValueClass cls) { return how == kFieldCopied ? value(cls) : interesting(); }

  bool mutate_event(proto::Event* e, Mutation how) {
    int field = int(below(23)) + 1;
    bool clear = how == kFieldCleared;
    auto enum_value = [&](int64_t known) { return int(chance(80) ? below(uint64_t(known)) : interesting()); };
    switch (field) {
      case 1: e->set_kind(proto::EventKind(clear ? 0 : enum_value(16))); return true;
      case 2:
        if (clear) e->clear_layer();
        else e->set_layer(proto::Layer(enum_value(4)));
        return true;
      case 3:
        if (clear) e->clear_api();
        else e->set_api(proto::Api(chance(80) ? kApis[below(std::size(kApis))] : int(interesting())));
        return true;
      case 4: e->set_time_delta_ns(clear ? 0 : int64_t(pick(how, kTime))); return true;
      case 5:
        if (clear) e->clear_tid();
        else e->set_tid(uint32_t(pick(how, kTid)));
        return true;
      case 6:
        if (clear) e->clear_device();
        else e->set_device(int32_t(pick(how, kDevice)));
        return true;
      case 7:
        if (clear) e->clear_stream();
        else e->set_stream(pick(how, kAddress));
        return true;
      case 8: e->set_address(clear ? 0 : pick(how, kAddress)); return true;
      case 9: e->set_size(clear ? 0 : pick(how, kSize)); return true;
      case 10: e->set_result(clear ? 0 : int32_t(pick(how, kOther))); return true;
      case 11: e->set_stack_id(clear ? 0 : pick(how, kStackId)); return true;
      case 12:
        if (clear) e->clear_allocator_allocated_bytes();
        else e->set_allocator_allocated_bytes(pick(how, kSize));
        return true;
      case 13:
        if (clear) e->clear_allocator_reserved_bytes();
        else e->set_allocator_reserved_bytes(pick(how, kSize));
        return true;
      case 14: e->set_device_free_bytes(clear ? 0 : pick(how, kSize)); return true;
      case 15: e->set_device_total_bytes(clear ? 0 : pick(how, kSize)); return true;
      case 16: e->set_handle(clear ? 0 : pick(how, kAddress)); return true;
      case 17: e->set_memory(proto::Memory(clear ? 0 : enum_value(7))); return true;
      case 18: e->set_graph(clear ? 0 : pick(how, kAddress)); return true;
      case 19: e->set_capture_id(clear ? 0 : pick(how, kAddress)); return true;
      case 20:
        if (clear) e->clear_process_used_bytes();
        else e->set_process_used_bytes(pick(how, kSize));
        return true;
      case 21:
        if (clear) e->clear_other_processes_used_bytes();
        else e->set_other_processes_used_bytes(pick(how, kSize));
        return true;
      case 22: e->set_context(clear ? 0 : pick(how, kAddress)); return true;
      default: e->set_time_delta_us(clear ? 0 : int64_t(pick(how, kTime))); return true;
    }
  }
  bool mutate_stack(proto::Stack* s, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(5)) {
      case 0: s->set_id(clear ? 0 : pick(how, kStackId)); return true;
      case 1: s->set_native_frames_cut(!s->native_frames_cut()); return true;
      case 2: s->set_python_frames_cut(!s->python_frames_cut()); return true;
      case 3:
        if (clear) s->clear_frames();
        else s->add_frames(frame());
        return true;
      default:
        if (s->frames_size() == 0) return false;
        s->set_frames(int(below(uint64_t(s->frames_size()))),
                      clear ? 0 : (chance(30) ? pick(how, kPythonId) | (uint64_t(1) << 63) : pick(how, kAddress)));
        return true;
    }
  }
  bool mutate_module(proto::Module* m, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(5)) {
      case 0: m->set_load_address(clear ? 0 : pick(how, kAddress)); return true;
      case 1: m->set_start(clear ? 0 : pick(how, kAddress)); return true;
      case 2: m->set_end(clear ? 0 : pick(how, kAddress)); return true;
      case 3: m->set_build_id(clear ? "" : std::string(below(64), char(below(256)))); return true;
      default: m->set_path(clear ? "" : chance(50) ? "/proc/self/mem" : "python3.11"); return true;
    }
  }
  bool mutate_python_frame(proto::PythonFrame* f, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(4)) {
      case 0: f->set_id(clear ? 0 : pick(how, kPythonId)); return true;
      case 1: f->set_line(clear ? 0 : uint32_t(pick(how, kOther))); return true;
      case 2: f->set_file(clear ? "" : "<frozen importlib._bootstrap>"); return true;
      default: f->set_function(clear ? "" : "Module._call_impl"); return true;
    }
  }
  bool mutate_start(proto::TraceStart* s, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(8)) {
      case 0: s->set_pid(clear ? 0 : uint32_t(pick(how, kTid))); return true;
      case 1: s->set_start_monotonic_ns(clear ? 0 : pick(how, kTime)); return true;
      case 2: s->set_start_unix_ns(clear ? 0 : pick(how, kTime)); return true;
      case 3: s->set_flush_interval_ms(clear ? 0 : uint32_t(pick(how, kOther))); return true;
      case 4: s->set_python_frames(clear ? 0 : uint32_t(pick(how, kOther))); return true;
      case 5:
        if (clear) s->clear_max_native_frames();
        else s->set_max_native_frames(uint32_t(pick(how, kOther)));
        return true;
      case 6:
        if (clear) s->clear_max_native_frames_python();
        else s->set_max_native_frames_python(uint32_t(pick(how, kOther)));
        return true;
      default:
        if (clear) s->clear_argv();
        else s->add_argv("--arg");
        return true;
    }
  }
  bool mutate_end(proto::TraceEnd* end, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(6)) {
      case 0: end->set_events(clear ? 0 : pick(how, kOther)); return true;
      case 1: end->set_dropped_events(clear ? 0 : pick(how, kOther)); return true;
      case 2: end->set_time_delta_ns(clear ? 0 : int64_t(pick(how, kTime))); return true;
      case 3: end->set_time_delta_us(clear ? 0 : int64_t(pick(how, kTime))); return true;
      case 4: end->set_how(proto::TraceEnd_How(clear ? 0 : int(below(6)))); return true;
      default: end->set_signal(clear ? 0 : int32_t(pick(how, kOther))); return true;
    }
  }
  bool mutate_notice(proto::Notice* n, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(3)) {
      case 0: n->set_code(proto::Notice_Code(clear ? 0 : int(below(8)))); return true;
      case 1: n->set_count(clear ? 0 : pick(how, kOther)); return true;
      default: n->set_message(clear ? "" : "the writer fell behind"); return true;
    }
  }
  bool mutate_thread(proto::ThreadInfo* t, Mutation how) {
    bool clear = how == kFieldCleared;
    if (chance(50)) t->set_tid(clear ? 0 : uint32_t(pick(how, kTid)));
    else t->set_name(clear ? "" : "pt_main_thread");
    return true;
  }

  bool mutate_range_name(proto::RangeName* n, Mutation how) {
    bool clear = how == kFieldCleared;
    if (chance(50)) n->set_id(clear ? 0 : pick(how, kOther));
    else n->set_name(clear ? "" : "backward");
    return true;
  }

  bool mutate_range_event(proto::RangeEvent* e, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(5)) {
      case 0: e->set_kind(proto::RangeEvent_Kind(clear ? 0 : below(7))); return true;
      case 1: e->set_name_id(clear ? 0 : pick(how, kOther)); return true;
      case 2: e->set_tid(clear ? 0 : uint32_t(pick(how, kTid))); return true;
      case 3: e->set_time_us(clear ? 0 : pick(how, kTime)); return true;
      default: e->set_range_id(clear ? 0 : pick(how, kOther)); return true;
    }
  }

  // The live set at attach (edge_attach_v3.bin): addresses and sizes from the pools, so that later frees meet them,
  // and the aggregate flag, whose frees are taken from a total.
  bool mutate_live_at_attach(proto::LiveAtAttach* l, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(7)) {
      case 0: l->set_layer(proto::Layer(clear ? 0 : below(3))); return true;
      case 1:
        l->set_api(clear ? proto::API_UNKNOWN : (chance(50) ? proto::TORCH_ALLOCATOR : proto::CUDA_MALLOC));
        return true;
      case 2: l->set_device(clear ? 0 : int32_t(pick(how, kDevice))); return true;
      case 3: l->set_address(clear ? 0 : pick(how, kAddress)); return true;
      case 4: l->set_size(clear ? 0 : pick(how, kSize)); return true;
      case 5: l->set_blocks_unknown(!clear && !l->blocks_unknown()); return true;
      default: l->set_memory(proto::Memory(clear ? 0 : below(6))); return true;
    }
  }
  bool mutate_attach_baseline(proto::AttachBaseline* b, Mutation how) {
    bool clear = how == kFieldCleared;
    switch (below(4)) {
      case 0: b->set_device(clear ? 0 : int32_t(pick(how, kDevice))); return true;
      case 1:
        if (clear) b->clear_allocator_allocated_bytes();
        else b->set_allocator_allocated_bytes(pick(how, kSize));
        return true;
      case 2:
        if (clear) b->clear_allocator_reserved_bytes();
        else b->set_allocator_reserved_bytes(pick(how, kSize));
        return true;
      default: b->set_device_free_bytes(clear ? 0 : pick(how, kSize)); return true;
    }
  }

  bool mutate_nvml_processes(proto::NvmlProcesses* list, Mutation how) {
    bool clear = how == kFieldCleared;
    if (chance(30)) {
      list->set_device(clear ? 0 : uint32_t(pick(how, kDevice)));
      return true;
    }
    if (list->processes().empty() || chance(20)) {
      if (clear) return false;
      list->add_processes()->set_pid(uint32_t(pick(how, kTid)));
      return true;
    }
    proto::NvmlProcess* p = list->mutable_processes(int(below(uint64_t(list->processes_size()))));
    if (chance(50)) p->set_pid(clear ? 0 : uint32_t(pick(how, kTid)));
    else if (clear) p->clear_used_bytes();
    else p->set_used_bytes(pick(how, kSize));
    return true;
  }

  std::mt19937_64 rng_;
  size_t max_size_;
  std::vector<uint64_t> pools_[kClassCount];
  uint64_t max_id_ = 0;
};

// Where a record is: chunk index and record index within it.
struct RecordRef {
  size_t chunk;
  size_t index;
};

size_t record_count(const PipelineInput& in) {
  size_t n = 0;
  for (const Chunk& c : in.chunks) n += c.records.size();
  return n;
}

// A record chosen uniformly over the whole input (false: there is none).
bool pick_record(Mutator& m, const PipelineInput& in, RecordRef* ref) {
  size_t n = record_count(in);
  if (n == 0) return false;
  size_t k = m.below(n);
  for (size_t c = 0; c < in.chunks.size(); ++c) {
    if (k < in.chunks[c].records.size()) {
      *ref = {c, k};
      return true;
    }
    k -= in.chunks[c].records.size();
  }
  return false;
}

std::string& record_at(PipelineInput& in, RecordRef ref) { return in.chunks[ref.chunk].records[ref.index]; }

// A position to insert a record at (a new chunk when the input has none).
RecordRef insert_position(Mutator& m, PipelineInput& in) {
  if (in.chunks.empty()) in.chunks.emplace_back();
  size_t c = m.below(in.chunks.size());
  return {c, m.below(in.chunks[c].records.size() + 1)};
}

// Applies mutation `how` to `in`. False when it does not apply (nothing was changed).
bool apply(Mutator& m, PipelineInput& in, Mutation how, size_t size_now) {
  size_t room = m.max_size() > size_now + 64 ? m.max_size() - size_now - 64 : 0;
  RecordRef a{}, b{};
  switch (how) {
    case kFieldInteresting:
    case kFieldCopied:
    case kFieldCleared:
      for (int attempt = 0; attempt < 4; ++attempt)
        if (pick_record(m, in, &a) && m.mutate_field(&record_at(in, a), how)) return true;
      return false;
    case kDuplicateRecord: {
      if (!pick_record(m, in, &a) || record_at(in, a).size() > room) return false;
      std::string copy = record_at(in, a);
      b = insert_position(m, in);
      in.chunks[b.chunk].records.insert(in.chunks[b.chunk].records.begin() + long(b.index), copy);
      return true;
    }
    case kDeleteRecord: {
      if (!pick_record(m, in, &a)) return false;
      // Sometimes a run of records: traces are long, one at a time would take forever to shrink them.
      auto& records = in.chunks[a.chunk].records;
      size_t n = m.chance(20) ? std::min<size_t>(records.size() - a.index, m.below(64) + 1) : 1;
      records.erase(records.begin() + long(a.index), records.begin() + long(a.index + n));
      return true;
    }
    case kSwapRecords:
      if (!pick_record(m, in, &a) || !pick_record(m, in, &b)) return false;
      std::swap(record_at(in, a), record_at(in, b));
      return true;
    case kMoveRecord: {
      if (!pick_record(m, in, &a)) return false;
      std::string moved = std::move(record_at(in, a));
      in.chunks[a.chunk].records.erase(in.chunks[a.chunk].records.begin() + long(a.index));
      b = insert_position(m, in);
      in.chunks[b.chunk].records.insert(in.chunks[b.chunk].records.begin() + long(b.index), std::move(moved));
      return true;
    }
    case kInsertRecord: {
      int kind = int(m.below(kInsertKindCount));
      std::string record = m.new_record(kind);
      if (record.size() > room) return false;
      ++stats().inserts[kind];
      b = insert_position(m, in);
      in.chunks[b.chunk].records.insert(in.chunks[b.chunk].records.begin() + long(b.index), std::move(record));
      return true;
    }
    case kBlowUpString: {
      for (int attempt = 0; attempt < 8; ++attempt) {
        if (!pick_record(m, in, &a)) return false;
        proto::Record r;
        if (!r.ParseFromString(record_at(in, a)) || !m.blow_up_string(&r, room)) continue;
        record_at(in, a) = r.SerializeAsString();
        return true;
      }
      return false;
    }
    case kBlowUpStack: {
      // A Stack of the input, else a new one (an event of the input then refers to it).
      proto::Record r;
      for (int attempt = 0; attempt < 8 && pick_record(m, in, &a); ++attempt)
        if (r.ParseFromString(record_at(in, a)) && r.has_stack()) {
          m.blow_up_stack(r.mutable_stack(), room + record_at(in, a).size());
          record_at(in, a) = r.SerializeAsString();
          return true;
        }
      if (!r.ParseFromString(m.new_record(kInsertStack))) return false;
      m.blow_up_stack(r.mutable_stack(), room);
      b = insert_position(m, in);
      in.chunks[b.chunk].records.insert(in.chunks[b.chunk].records.begin() + long(b.index), r.SerializeAsString());
      return true;
    }
    case kSplitChunk: {
      if (in.chunks.empty()) return false;
      size_t c = m.below(in.chunks.size());
      auto& records = in.chunks[c].records;
      Chunk second;
      size_t at = m.below(records.size() + 1);
      second.records.assign(records.begin() + long(at), records.end());
      second.tail = std::move(in.chunks[c].tail);
      records.resize(at);
      in.chunks[c].tail.clear();
      in.chunks.insert(in.chunks.begin() + long(c) + 1, std::move(second));
      return true;
    }
    case kMergeChunks: {
      if (in.chunks.size() < 2) return false;
      size_t c = m.below(in.chunks.size() - 1);
      Chunk& first = in.chunks[c];
      Chunk& second = in.chunks[c + 1];
      first.records.insert(first.records.end(), second.records.begin(), second.records.end());
      first.tail += second.tail;
      in.chunks.erase(in.chunks.begin() + long(c) + 1);
      return true;
    }
    case kChangeVersion: {
      static const uint8_t kVersions[] = {1, 2, 3, 1, 2, 3, 0, 4, 0xFE};
      uint8_t v = kVersions[m.below(std::size(kVersions))];
      if (v == in.version) return false;
      in.version = v;
      return true;
    }
    case kFlipFlag: in.flags ^= uint8_t(1u << m.below(8)); return true;
    case kToRawFile: {
      std::string file = memtrace::fuzz::trace_file(in);
      if (file.size() + 1 > m.max_size()) return false;
      in = PipelineInput{};
      in.raw = true;
      in.raw_file = std::move(file);
      return true;
    }
    case kBytesOfRecord: {
      if (!pick_record(m, in, &a)) return false;
      std::string& bytes = record_at(in, a);
      size_t cap = std::min(bytes.size() * 2 + 64, bytes.size() + room);
      std::string buffer = bytes;
      buffer.resize(std::max(cap, buffer.size()));
      buffer.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(buffer.data()), bytes.size(), buffer.size()));
      bytes = std::move(buffer);
      return true;
    }
    default: return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Strings with invalid UTF-8 make the lite runtime log an error at every parse and serialization: quiet.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  PipelineInput in = memtrace::fuzz::parse_input(data, size);
  const std::string file = memtrace::fuzz::trace_file(in);
  mem_file(0).write(file);
  // MEMTRACE_FUZZ_WRITE_TRACE=PATH: the input's trace as an .mtrace file, to run `memtrace` on a finding.
  if (const char* path = std::getenv("MEMTRACE_FUZZ_WRITE_TRACE"); path && *path)
    if (FILE* f = std::fopen(path, "wb")) {
      std::fwrite(file.data(), 1, file.size(), f);
      std::fclose(f);
    }
  run_pipeline(in);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Mutator m(seed, max_size);
  PipelineInput in = memtrace::fuzz::parse_input(data, size);
  // A raw file mutates as bytes, mostly: its frames are compressed, no record is visible.
  if (!in.raw && !m.chance(3)) {
    m.learn(in);
    for (int attempt = 0; attempt < 6; ++attempt) {
      PipelineInput mutated = in;
      Mutation how = Mutation(m.below(kBytesOfInput));  // every structured mutation, equally often
      // Field mutations are the bread and butter, inserts what reaches new event kinds: more often.
      if (m.chance(25)) how = Mutation(m.below(3));
      else if (m.chance(8)) how = kInsertRecord;
      if (!apply(m, mutated, how, size)) continue;
      std::string out = memtrace::fuzz::serialize_input(mutated);
      if (out.size() > max_size) continue;
      count(how);
      std::memcpy(data, out.data(), out.size());
      return out.size();
    }
    ++stats().fallbacks;
  }
  count(kBytesOfInput);
  return LLVMFuzzerMutate(data, size, max_size);
}

// Splices a run of records of the second input into the first (the header of the first).
extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1, const uint8_t* data2, size_t size2,
                                            uint8_t* out, size_t max_out_size, unsigned int seed) {
  Mutator m(seed, max_out_size);
  // libFuzzer picks this as often as LLVMFuzzerCustomMutator; half the time it declines (0), so that two
  // thirds of the mutations are the structured ones.
  if (m.chance(50)) return 0;
  PipelineInput first = memtrace::fuzz::parse_input(data1, size1);
  PipelineInput second = memtrace::fuzz::parse_input(data2, size2);
  if (first.raw || second.raw || second.chunks.empty()) return 0;
  const Chunk& from = second.chunks[m.below(second.chunks.size())];
  size_t begin = m.below(from.records.size() + 1);
  size_t end = begin + m.below(from.records.size() - begin + 1);
  RecordRef at = insert_position(m, first);
  auto& records = first.chunks[at.chunk].records;
  records.insert(records.begin() + long(at.index), from.records.begin() + long(begin),
                 from.records.begin() + long(end));
  std::string result = memtrace::fuzz::serialize_input(first);
  if (result.size() > max_out_size) return 0;
  count(kCrossOver);
  std::memcpy(out, result.data(), result.size());
  return result.size();
}
