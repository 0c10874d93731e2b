#include "cli/report_session.h"

#include <sys/stat.h>

namespace memtrace {

std::vector<std::string> parse_debug_paths(const std::string& value) {
  std::vector<std::string> dirs;
  size_t begin = 0;
  while (begin <= value.size()) {
    size_t end = value.find(':', begin);
    if (end == std::string::npos) end = value.size();
    std::string dir = value.substr(begin, end - begin);
    begin = end + 1;
    if (dir.empty()) continue;  // "a::b", a trailing ':'
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw UsageError("--debug-paths: '" + dir + "' is not a directory");
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    dirs.push_back(std::move(dir));
  }
  if (dirs.empty()) throw UsageError("--debug-paths needs at least one directory");
  return dirs;
}

int open_report(const std::vector<std::string>& args, bool with_live_at_peak, ReportSession* session) {
  session->args = parse_report_args(args, {"--json", "--all-frames"}, {"--top", "--debug-paths"});
  if (const std::string* top = session->args.value("--top")) session->options.top = parse_count("--top", *top);
  std::vector<std::string> debug_dirs;
  if (const std::string* paths = session->args.value("--debug-paths")) debug_dirs = parse_debug_paths(*paths);
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
  session->symbolizer = std::make_unique<Symbolizer>(session->analysis->stacks.modules(), std::move(debug_dirs));
  session->resolver = std::make_unique<FrameResolver>(session->analysis->stacks, *session->symbolizer);
  return kExitOk;
}

}  // namespace memtrace
