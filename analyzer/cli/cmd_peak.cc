// `memtrace peak TRACE [--at TIME] [--device N] [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]`: what
// was live at each device's peak allocated (or at TIME, seconds from trace start), broken down by what it is for
// (analysis/peak_breakdown.h) and as a tree by user line (analysis/live_tree.h).
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <memory>

#include "analysis/live_tree.h"
#include "analysis/peak_breakdown.h"
#include "cli/report_session.h"
#include "report/json/peak_json.h"
#include "report/json/report_json.h"
#include "report/text/peak_text.h"
#include "util/format.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

struct PeakArgs {
  ReportArgs report;
  std::optional<std::string> at;      // --at TIME as given
  std::optional<std::string> device;  // --device N as given
};

// --at's seconds, as nanoseconds from trace start. Throws UsageError for anything but a finite number.
int64_t parse_at(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || std::fabs(value) > 1e9)
    throw UsageError("--at needs a time in seconds from trace start (as the summary prints them), not '" + text + "'");
  return std::llround(value * 1e9);
}

int input_error(const Analysis& a, const std::string& what) {
  std::cerr << "memtrace: " << terminal_safe(a.path) << ": " << what << '\n';
  return kExitBadInput;
}

// The moments to break down: each device's peak allocated (the devices with one, or --device's), or every such
// device at --at's event. Returns kExitOk, or the exit code after printing the error line.
int choose_moments(const PeakArgs& args, const Analysis& a, std::vector<Moment>* moments) {
  std::vector<int32_t> devices;
  if (args.device) {
    const size_t device = parse_count("--device", *args.device);
    if (device > size_t(kMaxDeviceOrdinal) || !a.model.devices().contains(int32_t(device)))
      return input_error(a, "--device " + std::to_string(device) + ": the trace has no events of that device");
    devices.push_back(int32_t(device));
  } else {
    for (const auto& [device, state] : a.model.devices())
      if (state.peak_allocated().bytes > 0) devices.push_back(device);
  }
  std::optional<uint64_t> at_event;
  if (args.at) {
    const int64_t at_ns = parse_at(*args.at);
    // The end as the header prints it (`over 7.849 s`, rounded to the ms): a time given back from it is inside.
    const int64_t end_ns = (a.duration_ns() + 999'999) / 1'000'000 * 1'000'000;
    if (at_ns < 0 || at_ns > end_ns)
      return input_error(a, "--at " + *args.at + ": outside the trace, which runs from 0.000 s to " +
                                format_seconds(seconds(a.duration_ns())));
    const EventAtTime found = last_event_at_or_before(a, at_ns);
    if (!found.event)
      return input_error(a, "--at " + *args.at + ": before the trace's first event, at " +
                                format_moment_seconds(found.first_event_ns));
    at_event = found.event;
  }
  for (int32_t device : devices)
    moments->push_back(at_event ? Moment{device, *at_event}
                                : moment_of_peak(device, a.model.devices().at(device).peak_allocated()));
  return kExitOk;
}

int peak(const PeakArgs& args) {
  ReportSession s;
  if (int status = open_report(args.report, /*with_live_at_peak=*/false, &s); status != kExitOk) return status;
  const Analysis& a = *s.analysis;
  std::vector<Moment> moments;
  std::vector<MomentBreakdown> breakdowns;
  try {
    if (int status = choose_moments(args, a, &moments); status != kExitOk) return status;
    breakdowns = break_down_moments(a, moments, event_phases_of(a, *s.resolver), *s.resolver);
  } catch (const TraceError& e) {
    return report_trace_error(a.path, e);
  }
  SiteGrouping grouping(a.stacks);
  const bool at_time = args.at.has_value();
  if (args.report.json) {
    nlohmann::json peaks = nlohmann::json::array();
    for (const MomentBreakdown& b : breakdowns)
      peaks.push_back(peak_json(b, at_time, live_tree(b.live, *s.resolver, grouping), *s.resolver));
    nlohmann::json report = {{"trace", trace_json(a)}, {"peaks", peaks}};
    add_symbolizer_health(report["trace"], *s.symbolizer);
    std::cout << json_terminal_safe(report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
    return kExitOk;
  }
  print_trace_overview(std::cout, a);
  if (breakdowns.empty()) std::cout << "\nNo device has allocated memory in this trace.\n";
  for (const MomentBreakdown& b : breakdowns)
    print_peak_report(std::cout, b, live_tree(b.live, *s.resolver, grouping), at_time, began_at_attach(a), *s.resolver,
                      s.options);
  return kExitOk;
}

}  // namespace

RunCommand add_peak(CLI::App& memtrace) {
  auto args = std::make_shared<PeakArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "peak", "what was live at each device's peak allocated (or at --at), broken down and by user line");
  add_report_options(*command, &args->report, "user lines shown, and call sites under each (default 10)");
  command
      ->add_option_function<std::string>(
          "--at", [args](const std::string& value) { args->at = value; },
          "the moment to look at instead of the peak: right after the last event at or before TIME, seconds "
          "from trace start (peak prints its moments to the microsecond)")
      ->type_name("TIME");
  command
      ->add_option_function<std::string>(
          "--device", [args](const std::string& value) { args->device = value; }, "only this device")
      ->type_name("N");
  return [args] { return peak(*args); };
}

}  // namespace memtrace
