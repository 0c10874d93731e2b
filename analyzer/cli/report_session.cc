#include "cli/report_session.h"

#include "analysis/iterations.h"
#include "util/terminal_text.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

namespace memtrace {

void add_report_options(CLI::App& command, ReportArgs* args, const std::string& top_help, bool many_traces) {
  if (many_traces) add_traces(command, &args->trace, &args->traces);
  else add_trace(command, &args->trace);
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

namespace {

// One line about the output file, with the system's reason where there is one.
int output_error(const std::string& output, const char* what, int error) {
  std::cerr << "memtrace: " << terminal_safe(output) << ": " << what;
  if (error) std::cerr << ": " << std::strerror(error);
  std::cerr << '\n';
  return kExitBadInput;
}

}  // namespace

namespace {

// write_output_file's work for one or more traces: `write` returns kExitOk, or another status once it has printed
// why it failed (the output is then discarded).
int write_output_of(const std::string& output, const std::vector<std::string>& traces,
                    const std::function<int(std::ostream& out)>& write) {
  // The file -o names, through any symlink: the trace itself is refused (writing would destroy it), a device or
  // a pipe is written in place and never removed, anything else is written beside it and renamed over it once
  // complete, so that a failed run leaves what was there.
  struct stat target_stat {
  }, trace_stat{};
  const bool exists = ::stat(output.c_str(), &target_stat) == 0;
  for (const std::string& trace : traces)
    if (exists && ::stat(trace.c_str(), &trace_stat) == 0 && target_stat.st_dev == trace_stat.st_dev &&
        target_stat.st_ino == trace_stat.st_ino)
      return output_error(output, "is the trace being read; give -o another file", 0);
  if (exists && S_ISDIR(target_stat.st_mode)) return output_error(output, "cannot write", EISDIR);
  const bool in_place = exists && !S_ISREG(target_stat.st_mode);
  std::string target = output;
  if (exists && !in_place) {
    char* resolved = ::realpath(output.c_str(), nullptr);  // write through a symlink, as opening it would
    if (resolved) target = resolved;
    std::free(resolved);
  }
  const std::string written = in_place ? target : target + ".memtrace-" + std::to_string(::getpid());
  errno = 0;
  std::ofstream out(written, std::ios::binary | std::ios::trunc);
  if (!out) return output_error(output, "cannot write", errno);
  auto discard = [&] {
    out.close();
    if (!in_place) std::remove(written.c_str());
  };
  if (int status = write(out); status != kExitOk) {
    discard();
    return status;
  }
  // errno is that of the write that failed, if one did (the stream stops writing after its first failure).
  if (out) out.flush();
  const int write_errno = errno;
  if (!out) {
    discard();
    return output_error(output, "write failed", write_errno);
  }
  out.close();
  if (!out) {
    const int close_errno = errno;
    discard();
    return output_error(output, "write failed", close_errno);
  }
  if (!in_place && std::rename(written.c_str(), target.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(written.c_str());
    return output_error(output, "cannot write", rename_errno);
  }
  return kExitOk;
}

}  // namespace

int write_output_file(const std::string& output, const std::string& trace,
                      const std::function<void(std::ostream& out)>& write) {
  return write_output_of(output, {trace}, [&](std::ostream& out) {
    try {
      write(out);
    } catch (const TraceError& e) {
      return report_trace_error(trace, e);
    }
    return kExitOk;
  });
}

int write_output_file(const std::string& output, const std::vector<std::string>& traces,
                      const std::function<int(std::ostream& out)>& write) {
  return write_output_of(output, traces, write);
}

int write_output_database(const std::string& output, const std::vector<std::string>& traces,
                          const std::function<int(const std::string& new_file)>& write) {
  struct stat target_stat {};
  const bool exists = ::stat(output.c_str(), &target_stat) == 0;
  for (const std::string& trace : traces) {
    struct stat trace_stat {};
    if (exists && ::stat(trace.c_str(), &trace_stat) == 0 && target_stat.st_dev == trace_stat.st_dev &&
        target_stat.st_ino == trace_stat.st_ino)
      return output_error(output, "is the trace being read; give -o another file", 0);
  }
  if (exists && S_ISDIR(target_stat.st_mode)) return output_error(output, "cannot write", EISDIR);
  // A database is written by name, seeking back into the file: a device or a pipe cannot hold one.
  if (exists && !S_ISREG(target_stat.st_mode)) return output_error(output, "is not a regular file; give -o a file", 0);
  std::string target = output;
  if (exists) {
    char* resolved = ::realpath(output.c_str(), nullptr);  // replace the file a symlink names, not the symlink
    if (resolved) target = resolved;
    std::free(resolved);
  }
  const std::string written = target + ".memtrace-" + std::to_string(::getpid());
  std::remove(written.c_str());  // left by an earlier run of the same pid that was killed
  if (int status = write(written); status != kExitOk) {
    std::remove(written.c_str());
    return status;
  }
  if (std::rename(written.c_str(), target.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(written.c_str());
    return output_error(output, "cannot write", rename_errno);
  }
  return kExitOk;
}

void warn_if_truncated(const Analysis& analysis, const std::string& what) {
  if (!analysis.read.truncated) return;
  std::cerr << "memtrace: " << terminal_safe(analysis.path) << ": truncated trace, " << what
            << " holds it up to the last complete chunk (after byte " << analysis.read.complete_bytes << ": "
            << analysis.read.tail << ")\n";
}

EventPhases event_phases_of(const Analysis& analysis, FrameResolver& resolver) {
  return find_iterations(collect_event_origins(analysis.path), analysis.stacks, resolver, analysis.nvtx_ranges);
}

}  // namespace memtrace
