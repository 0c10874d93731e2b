// `memtrace leaks TRACE... [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]`: allocations live at
// exit (first PYTHON_FINALIZING, else end of trace), grouped by call site, growing sites first. Of several traces or
// a directory: the leak candidates merged by call site across the processes, then each process's briefly.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "analysis/iteration_report.h"
#include "cli/fleet_session.h"
#include "cli/report_session.h"
#include "report/json/report_json.h"
#include "report/text/fleet_text.h"
#include "report/text/iterations_text.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

int leaks_of_many(const ReportArgs& args) {
  const FleetRead read = read_fleet(args);
  if (read.view.processes.empty()) return fleet_exit_status(read.unreadable);  // nothing read: the lines said it
  if (args.json) {
    print_json_document(fleet_document(read.view, read.unreadable));
  } else {
    print_fleet_overview(std::cout, read.view);
    print_merged_leaks(std::cout, read.view, read.options.top);
    print_process_leaks(std::cout, read.view, read.options.top);
  }
  return fleet_exit_status(read.unreadable);
}

int leaks(const ReportArgs& args) {
  if (names_many_traces(args)) return leaks_of_many(args);
  ReportSession s;
  if (int status = open_report(args, /*with_live_at_peak=*/false, &s); status != kExitOk) return status;
  IterationReport iterations;
  try {
    iterations = analyze_iterations(*s.analysis, *s.resolver, s.analysis->nvtx_ranges);
  } catch (const TraceError& e) {
    return report_trace_error(s.analysis->path, e);
  }
  if (args.json) {
    nlohmann::json report = {{"trace", trace_json(*s.analysis)},
                             {"iterations", iterations_json(iterations, *s.resolver)},
                             {"leaks", leaks_json(*s.analysis, *s.resolver, &iterations)}};
    add_symbolizer_health(report["trace"], *s.symbolizer);
    std::cout << json_terminal_safe(report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
    return kExitOk;
  }
  print_trace_overview(std::cout, *s.analysis);
  print_traps(std::cout, iterations);
  print_leaks(std::cout, *s.analysis, *s.resolver, s.options, &iterations);
  return kExitOk;
}

}  // namespace

RunCommand add_leaks(CLI::App& memtrace) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command =
      memtrace.add_subcommand("leaks", "allocations live at exit, grouped by call site, growing sites first");
  add_report_options(*command, args.get(), "call sites shown (default 10)", /*many_traces=*/true);
  return [args] { return leaks(*args); };
}

}  // namespace memtrace
