// `memtrace oom TRACE... [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]`: every failed allocation
// with what the process and the device held at that moment, and why it most likely failed (oom_diagnosis.h). Of
// several traces or a directory: the report of many processes (who else held each GPU), then the OOM report of
// each process that had a failed allocation.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "analysis/oom_report.h"
#include "cli/fleet_session.h"
#include "cli/report_session.h"
#include "report/json/oom_json.h"
#include "report/json/report_json.h"
#include "report/text/fleet_text.h"
#include "report/text/oom_text.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

// One trace's OOM report, read (again) from `args`' TRACE: its JSON document into `json_report` where given, else
// its text on stdout. kExitBadInput after the one line where the trace does not read.
int oom_of_trace(const ReportArgs& args, nlohmann::json* json_report) {
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
  if (json_report) {
    *json_report = oom_report_json(*s.analysis, report, *s.resolver);
    add_symbolizer_health((*json_report)["trace"], *s.symbolizer);
    return kExitOk;
  }
  if (report.total == 0) {
    std::cout << "no failed allocation in " << terminal_safe(trace) << '\n';
    return kExitOk;
  }
  print_oom_report(std::cout, *s.analysis, report, *s.resolver, s.options);
  return kExitOk;
}

uint64_t ooms_of(const ProcessSummary& process) {
  uint64_t ooms = 0;
  for (const ProcessDevice& d : process.devices) ooms += d.ooms;
  return ooms;
}

int oom_of_many(const ReportArgs& args) {
  FleetRead read = read_fleet(args);
  if (read.view.processes.empty()) return fleet_exit_status(read.unreadable);  // nothing read: the lines said it
  if (!args.json) print_fleet(std::cout, read.view, read.options.top);
  nlohmann::json reports = nlohmann::json::array();
  int status = fleet_exit_status(read.unreadable);
  for (size_t i = 0; i < read.view.processes.size(); ++i) {
    const ProcessSummary& p = read.view.processes[i];
    if (!ooms_of(p)) continue;
    ReportArgs one = args;
    one.trace.path = p.trace;
    if (!args.json)
      std::cout << "\n"
                << (p.rank ? "rank " + std::to_string(*p.rank) + ", " : "") << "pid " << p.pid << ": "
                << terminal_safe(p.trace) << '\n';
    nlohmann::json report;
    if (oom_of_trace(one, args.json ? &report : nullptr) != kExitOk) status = kExitBadInput;
    else if (args.json) reports.push_back({{"process", i}, {"report", std::move(report)}});
  }
  if (args.json) {
    nlohmann::json document = fleet_document(read.view, read.unreadable);
    document["ooms"] = std::move(reports);
    print_json_document(document);
  }
  return status;
}

int oom(const ReportArgs& args) {
  if (names_many_traces(args)) return oom_of_many(args);
  nlohmann::json json_report;
  int status = oom_of_trace(args, args.json ? &json_report : nullptr);
  if (status == kExitOk && args.json) print_json_document(json_report);
  return status;
}

}  // namespace

RunCommand add_oom(CLI::App& memtrace) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "oom", "every failed allocation: what the process and the device held then, and why it most likely failed");
  add_report_options(*command, args.get(),
                     "call sites shown per failed allocation (default " + std::to_string(kSitesPerOom) + ")",
                     /*many_traces=*/true);
  return [args] { return oom(*args); };
}

}  // namespace memtrace
