#include "cli/report_session.h"

#include "analysis/iterations.h"
#include "util/terminal_text.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

namespace memtrace {

void add_report_options(CLI::App& command, ReportArgs* args, const std::string& top_help) {
  add_trace(command, &args->trace);
  command.add_flag("--json", args->json, "the report as one JSON document instead of text");
  command
      .add_option_function<std::string>(
          "--top", [args](const std::string& value) { args->top = value; }, top_help)
      ->type_name("N");
  command.add_flag("--all-frames", args->all_frames,
                   "every frame, also the runtime's own and those not symbolized on this machine (as offsets)");
  command
      .add_option_function<std::string>(
          "--debug-paths", [args](const std::string& value) { args->debug_paths = value; },
          "find symbol files in these directories too, by build id or by file name")
      ->type_name("DIR[:DIR...]");
}

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

int open_report(const ReportArgs& args, bool with_live_at_peak, ReportSession* session) {
  const std::string& trace = check_trace(args.trace);
  if (args.top) session->options.top = parse_count("--top", *args.top);
  std::vector<std::string> debug_dirs;
  if (args.debug_paths) debug_dirs = parse_debug_paths(*args.debug_paths);
  session->options.all_frames = args.all_frames;
  try {
    session->analysis = analyze_trace(trace, with_live_at_peak);
  } catch (const TraceError& e) {
    return report_trace_error(trace, e);
  }
  if (const auto& start = session->analysis->info.start;
      start && start->has_max_native_frames() && start->has_max_native_frames_python()) {
    session->options.max_native_frames = start->max_native_frames();
    session->options.max_native_frames_python = start->max_native_frames_python();
  }
  session->symbolizer = std::make_unique<Symbolizer>(session->analysis->stacks.modules(), std::move(debug_dirs));
  session->resolver = std::make_unique<FrameResolver>(session->analysis->stacks, *session->symbolizer);
  return kExitOk;
}

int write_output_file(const std::string& output, const std::string& trace,
                      const std::function<void(std::ostream& out)>& write) {
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "memtrace: " << terminal_safe(output) << ": cannot write\n";
    return kExitBadInput;
  }
  try {
    write(out);
  } catch (const TraceError& e) {
    out.close();
    std::remove(output.c_str());
    return report_trace_error(trace, e);
  }
  out.close();
  if (!out) {
    std::remove(output.c_str());
    std::cerr << "memtrace: " << terminal_safe(output) << ": write failed\n";
    return kExitBadInput;
  }
  return kExitOk;
}

EventPhases event_phases_of(const Analysis& analysis, FrameResolver& resolver) {
  return find_iterations(collect_event_origins(analysis.path), analysis.stacks, resolver, analysis.nvtx_ranges);
}

}  // namespace memtrace
