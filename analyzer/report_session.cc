#include "report_session.h"

namespace memtrace {

int open_report(const std::vector<std::string>& args, bool with_live_at_peak, ReportSession* session) {
  session->args = parse_report_args(args, {"--json", "--all-frames"}, {"--top"});
  if (const std::string* top = session->args.value("--top")) session->options.top = parse_count("--top", *top);
  session->options.all_frames = session->args.has("--all-frames");
  try {
    session->analysis = analyze_trace(session->args.trace, with_live_at_peak);
  } catch (const TraceError& e) {
    return report_trace_error(session->args.trace, e);
  }
  if (const auto& start = session->analysis->info.start; start && start->has_max_native_frames() &&
                                                             start->has_max_native_frames_python()) {
    session->options.max_native_frames = start->max_native_frames();
    session->options.max_native_frames_python = start->max_native_frames_python();
  }
  session->symbolizer = std::make_unique<Symbolizer>(session->analysis->stacks.modules());
  session->resolver = std::make_unique<FrameResolver>(session->analysis->stacks, *session->symbolizer);
  return kExitOk;
}

}  // namespace memtrace
