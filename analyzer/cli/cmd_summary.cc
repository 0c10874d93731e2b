// `memtrace summary TRACE... [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]`: of one trace, peaks,
// finals, what was live at each peak, leak candidates, OOM events and trace health (--json adds the trace's
// `processes` entry, what `merge` reads); of several traces or a directory, the report of many processes
// (fleet_text.h, docs/many-processes.md).
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <memory>

#include "analysis/iteration_report.h"
#include "analysis/peak_breakdown.h"
#include "cli/fleet_session.h"
#include "cli/report_session.h"
#include "fleet/process_summary.h"
#include "report/json/peak_json.h"
#include "report/json/report_json.h"
#include "report/text/fleet_text.h"
#include "report/text/iterations_text.h"
#include "report/text/peak_text.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

int summary_of_many(const ReportArgs& args) {
  const FleetRead read = read_fleet(args);
  if (read.view.processes.empty()) return fleet_exit_status(read.unreadable);  // nothing read: the lines said it
  if (args.json) print_json_document(fleet_document(read.view, read.unreadable));
  else print_fleet(std::cout, read.view, read.options.top);
  return fleet_exit_status(read.unreadable);
}

int summary(const ReportArgs& args) {
  if (names_many_traces(args)) return summary_of_many(args);
  ReportSession s;
  if (int status = open_report(args, /*with_live_at_peak=*/true, &s); status != kExitOk) return status;
  const Analysis& a = *s.analysis;
  std::map<int32_t, MomentBreakdown> breakdowns;
  IterationReport iterations;
  try {
    iterations = analyze_iterations(a, *s.resolver, a.nvtx_ranges);
    breakdowns = breakdowns_at_peaks(a, iterations.phases, *s.resolver);
  } catch (const TraceError& e) {
    return report_trace_error(a.path, e);
  }
  if (args.json) {
    nlohmann::json devices = devices_json(a, *s.resolver);
    for (nlohmann::json& entry : devices) {
      auto b = breakdowns.find(entry["device"].get<int32_t>());
      entry["peak_breakdown"] = b == breakdowns.end() ? nlohmann::json(nullptr) : breakdown_json(b->second);
    }
    const ProcessSummary process = summarize_process(a, *s.resolver, kLeakSitesKept);
    nlohmann::json report = {{"trace", trace_json(a)},
                             {"devices", devices},
                             {"process", process_json(a)},
                             {"iterations", iterations_json(iterations, *s.resolver)},
                             {"leaks", leaks_json(a, *s.resolver, &iterations)},
                             {"ooms", ooms_json(a, *s.resolver)},
                             {"processes", nlohmann::json::array({process_summary_json(process)})}};
    add_symbolizer_health(report["trace"], *s.symbolizer);
    std::cout << json_terminal_safe(report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
    return kExitOk;
  }
  print_trace_overview(std::cout, a);
  print_devices(std::cout, a, *s.resolver, s.options, [&](std::ostream& out, int32_t device) {
    if (auto b = breakdowns.find(device); b != breakdowns.end()) print_breakdown_lines(out, b->second, "  ");
  });
  print_process(std::cout, a);
  print_iterations(std::cout, iterations, s.options);
  print_traps(std::cout, iterations);
  print_leaks(std::cout, a, *s.resolver, s.options, &iterations);
  print_ooms(std::cout, a, *s.resolver, s.options);
  print_health(std::cout, a, s.symbolizer->modules_not_opened());
  return kExitOk;
}

}  // namespace

RunCommand add_summary(CLI::App& memtrace) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "summary",
      "peaks, finals, what was live at each peak, leak candidates, OOM events and trace health; of many traces, "
      "per GPU, per rank, the process tree and the leaks merged");
  add_report_options(*command, args.get(), "call sites shown per list (default 10)", /*many_traces=*/true);
  return [args] { return summary(*args); };
}

}  // namespace memtrace
