// `memtrace leaks TRACE [--json] [--top N]`: allocations live at exit (first PYTHON_FINALIZING, else
// end of trace), grouped by call site, growing sites first.
#include <iostream>

#include "report/json/report_json.h"
#include "cli/report_session.h"
#include "util/terminal_text.h"

namespace memtrace {

int cmd_leaks(const std::vector<std::string>& args) {
  ReportSession s;
  if (int status = open_report(args, /*with_live_at_peak=*/false, &s); status != kExitOk) return status;
  if (s.json()) {
    nlohmann::json report = {{"trace", trace_json(*s.analysis)}, {"leaks", leaks_json(*s.analysis, *s.resolver)}};
    add_symbolizer_health(report["trace"], *s.symbolizer);
    std::cout << json_terminal_safe(report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
    return kExitOk;
  }
  print_trace_overview(std::cout, *s.analysis);
  print_leaks(std::cout, *s.analysis, *s.resolver, s.options);
  return kExitOk;
}

}  // namespace memtrace
