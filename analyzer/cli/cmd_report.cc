// `memtrace report TRACE... -o FILE [--debug-paths DIR[:DIR...]]`: the HTML report, one self-contained page. Of one
// trace it draws the timeline per device, what was live by call site, the flame graph at the peak, the leaks, the
// OOM diagnoses, the traps and the trace's health; of several traces or a directory, the processes as a tree, per
// GPU its users, untraced memory and the combined timeline, the ranks, wrong devices and merged leaks
// (docs/report.md).
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/fleet_session.h"
#include "cli/report_session.h"
#include "report/html/fleet_report_data.h"
#include "report/html/report_assets.h"
#include "report/html/report_data.h"
#include "report/html/report_html.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

struct ReportCommandArgs {
  ReportArgs report;  // TRACE and --debug-paths (the other report options are not offered)
  std::string output;
};

// Points of a combined timeline on the page: as many as the single trace's coarse level has bins.
constexpr size_t kCombinedPoints = 2000;

// The input -o names, if it names one (write_output_file then refuses to write over it), else the first trace.
std::string input_named_by(const std::string& output, const FleetRead& read) {
  std::vector<std::string> inputs;
  for (const ProcessSummary& p : read.view.processes) inputs.push_back(p.trace);
  for (const UnreadableTrace& u : read.unreadable) inputs.push_back(u.trace);
  for (const std::string& input : inputs) {
    std::error_code ignored;
    if (std::filesystem::equivalent(output, input, ignored)) return input;
  }
  return inputs.front();
}

// The page of many processes. An input that does not read gets its line (read_fleet) and exit status 2; the page
// of the others is still written, as `summary` still reports them.
int report_of_many(const ReportCommandArgs& args) {
  const FleetRead read = read_fleet(args.report, kCombinedPoints);
  if (read.view.processes.empty()) return kExitBadInput;  // every input said why it did not read
  const nlohmann::json data = fleet_report_data(read.view);
  int status = write_output_file(args.output, input_named_by(args.output, read),
                                 [&](std::ostream& out) { write_report_html(data, out); });
  if (status != kExitOk) return status;
  for (const ProcessSummary& p : read.view.processes)
    if (p.truncated)
      std::cerr << "memtrace: " << terminal_safe(p.trace) << ": truncated trace, the report shows it up to its last "
                << "complete chunk\n";
  return fleet_exit_status(read.unreadable);
}

int report(const ReportCommandArgs& args) {
  if (args.output.empty()) throw UsageError("report needs -o FILE");
  // A memtrace built without the browser packages (report/html/assets_missing.cc) says so before reading anything.
  if (const char* missing = report_html_assets_missing()) {
    std::cerr << missing << '\n';
    return kExitBadInput;
  }
  if (names_many_traces(args.report)) return report_of_many(args);
  ReportSession session;
  if (int status = open_report(args.report, /*with_live_at_peak=*/true, &session); status != kExitOk) return status;
  nlohmann::json data;
  try {
    data = report_data(*session.analysis, *session.resolver, session.symbolizer.get());
  } catch (const TraceError& e) {
    return report_trace_error(session.analysis->path, e);
  }
  int status =
      write_output_file(args.output, session.analysis->path, [&](std::ostream& out) { write_report_html(data, out); });
  if (status == kExitOk) warn_if_truncated(*session.analysis, "the report");
  return status;
}

}  // namespace

RunCommand add_report(CLI::App& memtrace) {
  auto args = std::make_shared<ReportCommandArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "report",
      "the HTML report: one self-contained page with the timeline, flame graph, leaks and OOMs; "
      "of many traces, per GPU, per rank and the process tree (docs/report.md)");
  add_traces(*command, &args->report.trace, &args->report.traces);
  command->add_option("-o,--output", args->output, "the HTML file to write")->required()->type_name("FILE");
  command
      ->add_option_function<std::string>(
          "--debug-paths", [args](const std::string& value) { args->report.debug_paths = value; },
          "find symbol files in these directories too, by build id or by file name")
      ->type_name("DIR[:DIR...]");
  return [args] { return report(*args); };
}

}  // namespace memtrace
