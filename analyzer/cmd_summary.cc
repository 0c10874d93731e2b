// `memtrace summary TRACE [--json] [--top N] [--all-frames]`: peaks, finals, what was
// live at each peak, leak candidates, OOM events and trace health.
#include <iostream>

#include "analysis.h"
#include "commands.h"
#include "report_json.h"
#include "report_text.h"

namespace memtrace {

int cmd_summary(const std::vector<std::string>& args) {
  ParsedArgs parsed = parse_report_args(args, {"--json", "--all-frames"}, {"--top"});
  TextOptions options;
  if (const std::string* top = parsed.value("--top")) options.top = parse_count("--top", *top);
  options.all_frames = parsed.has("--all-frames");
  std::unique_ptr<Analysis> analysis;
  try {
    analysis = analyze_trace(parsed.trace, /*with_live_at_peak=*/true);
  } catch (const TraceError& e) {
    return report_trace_error(parsed.trace, e);
  }
  Symbolizer symbolizer(analysis->stacks.modules());
  FrameResolver resolver(analysis->stacks, symbolizer);
  if (parsed.has("--json")) {
    nlohmann::json report = {{"trace", trace_json(*analysis)},
                             {"devices", devices_json(*analysis, resolver)},
                             {"leaks", leaks_json(*analysis, resolver)},
                             {"ooms", ooms_json(*analysis, resolver)}};
    std::cout << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return kExitOk;
  }
  print_trace_overview(std::cout, *analysis);
  print_devices(std::cout, *analysis, resolver, options);
  print_leaks(std::cout, *analysis, resolver, options);
  print_ooms(std::cout, *analysis, resolver, options);
  print_health(std::cout, *analysis);
  return kExitOk;
}

}  // namespace memtrace
