// `memtrace report TRACE -o FILE [--debug-paths DIR[:DIR...]]`: the HTML report, one self-contained page that
// draws the timeline per device, what was live by call site, the flame graph at the peak, the leaks, the OOM
// diagnoses, the traps and the trace's health (docs/report.md).
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/report_session.h"
#include "report/html/report_assets.h"
#include "report/html/report_data.h"
#include "report/html/report_html.h"

namespace memtrace {
namespace {

struct ReportCommandArgs {
  ReportArgs report;  // TRACE and --debug-paths (the other report options are not offered)
  std::string output;
};

int report(const ReportCommandArgs& args) {
  if (args.output.empty()) throw UsageError("report needs -o FILE");
  // A memtrace built without the browser packages (report/html/assets_missing.cc) says so before reading anything.
  if (const char* missing = report_html_assets_missing()) {
    std::cerr << missing << '\n';
    return kExitBadInput;
  }
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
  CLI::App* command =
      memtrace.add_subcommand("report",
                              "the HTML report: one self-contained page with the timeline, flame graph, leaks and OOMs "
                              "(docs/report.md)");
  add_trace(*command, &args->report.trace);
  command->add_option("-o,--output", args->output, "the HTML file to write")->required()->type_name("FILE");
  command
      ->add_option_function<std::string>(
          "--debug-paths", [args](const std::string& value) { args->report.debug_paths = value; },
          "find symbol files in these directories too, by build id or by file name")
      ->type_name("DIR[:DIR...]");
  return [args] { return report(*args); };
}

}  // namespace memtrace
