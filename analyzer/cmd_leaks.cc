// `memtrace leaks TRACE [--json] [--top N]`: allocations live at exit (first PYTHON_FINALIZING, else
// end of trace), grouped by call site, growing sites first.
#include <iostream>

#include "analysis.h"
#include "commands.h"
#include "report_json.h"
#include "report_text.h"

namespace memtrace {

int cmd_leaks(const std::vector<std::string>& args) {
  ParsedArgs parsed = parse_report_args(args, {"--json", "--all-frames"}, {"--top"});
  TextOptions options;
  if (const std::string* top = parsed.value("--top")) options.top = parse_count("--top", *top);
  options.all_frames = parsed.has("--all-frames");
  std::unique_ptr<Analysis> analysis;
  try {
    analysis = analyze_trace(parsed.trace, /*with_live_at_peak=*/false);
  } catch (const TraceError& e) {
    return report_trace_error(parsed.trace, e);
  }
  Symbolizer symbolizer(analysis->stacks.modules());
  FrameResolver resolver(analysis->stacks, symbolizer);
  if (parsed.has("--json")) {
    nlohmann::json report = {{"trace", trace_json(*analysis)}, {"leaks", leaks_json(*analysis, resolver)}};
    std::cout << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return kExitOk;
  }
  print_trace_overview(std::cout, *analysis);
  print_leaks(std::cout, *analysis, resolver, options);
  return kExitOk;
}

}  // namespace memtrace
