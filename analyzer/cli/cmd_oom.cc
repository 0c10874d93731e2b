// `memtrace oom TRACE [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]`: every failed allocation
// with what the process and the device held at that moment, and why it most likely failed (oom_diagnosis.h).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "analysis/oom_report.h"
#include "cli/report_session.h"
#include "report/json/oom_json.h"
#include "report/json/report_json.h"
#include "report/text/oom_text.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

int oom(const ReportArgs& args) {
  ReportSession s;
  if (int status = open_report(args, /*with_live_at_peak=*/false, &s); status != kExitOk) return status;
  const std::string& trace = args.trace.path;
  size_t sites_per_oom = args.top ? s.options.top : kSitesPerOom;
  OomReport report;
  try {
    report = build_oom_report(*s.analysis, sites_per_oom);
  } catch (const TraceError& e) {  // the file changed between the passes
    return report_trace_error(trace, e);
  }
  if (args.json) {
    nlohmann::json json_report = oom_report_json(*s.analysis, report, *s.resolver);
    add_symbolizer_health(json_report["trace"], *s.symbolizer);
    std::cout << json_terminal_safe(json_report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
    return kExitOk;
  }
  if (report.total == 0) {
    std::cout << "no failed allocation in " << terminal_safe(trace) << '\n';
    return kExitOk;
  }
  print_oom_report(std::cout, *s.analysis, report, *s.resolver, s.options);
  return kExitOk;
}

}  // namespace

RunCommand add_oom(CLI::App& memtrace) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "oom", "every failed allocation: what the process and the device held then, and why it most likely failed");
  add_report_options(*command, args.get(),
                     "call sites shown per failed allocation (default " + std::to_string(kSitesPerOom) + ")");
  return [args] { return oom(*args); };
}

}  // namespace memtrace
