#include "cli/fleet_session.h"

#include <sys/stat.h>

#include <iostream>
#include <set>

#include "cli/commands.h"
#include "report/json/fleet_json.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// TraceArgError's line names the path itself ("DIR: no .mtrace files in it"): the reason alone, for `error`.
std::string reason_without_path(const std::string& path, const std::string& what) {
  const std::string prefix = terminal_safe(path) + ": ";
  return what.compare(0, prefix.size(), prefix) == 0 ? what.substr(prefix.size()) : what;
}

// Every trace the arguments name, each once; an argument that names nothing is added to `unreadable` and said.
std::vector<std::string> expand_each(const std::vector<std::string>& args, std::vector<UnreadableTrace>* unreadable) {
  std::vector<std::string> traces;
  std::set<std::string> seen;
  for (const std::string& arg : args) {
    std::vector<std::string> named;
    try {
      named = expand_trace_args({arg});
    } catch (const TraceArgError& e) {
      unreadable->push_back({arg, reason_without_path(arg, e.what())});
      print_unreadable(unreadable->back());
      continue;
    }
    for (std::string& trace : named)
      if (seen.insert(trace).second) traces.push_back(std::move(trace));
  }
  return traces;
}

}  // namespace

bool names_many_traces(const ReportArgs& args) {
  return args.traces.size() > 1 || (args.traces.size() == 1 && is_directory(args.traces.front()));
}

FleetRead read_fleet(const ReportArgs& args, size_t combined_points) {
  check_trace(args.trace);
  FleetRead read;
  if (args.top) read.options.top = parse_count("--top", *args.top);
  read.options.all_frames = args.all_frames;
  ReadManyOptions options;
  options.top_leaks = kLeakSitesKept;  // --top is what the reports show, not what the figures are made of
  if (args.debug_paths) options.debug_dirs = parse_debug_paths(*args.debug_paths);
  std::vector<std::string> traces = expand_each(args.traces, &read.unreadable);
  ReadManyResult result = read_processes(traces, options);
  for (const UnreadableTrace& trace : result.unreadable) {
    read.unreadable.push_back(trace);
    print_unreadable(trace);
  }
  read.view = build_fleet(std::move(result.processes));
  // The text and JSON reports give only the combined peaks: two points of series are the fewest it takes.
  for (const std::string& failure : add_combined_timelines(read.view, combined_points))
    std::cerr << "memtrace: " << terminal_safe(failure) << '\n';
  return read;
}

void print_unreadable(const UnreadableTrace& input) {
  std::cerr << "memtrace: " << terminal_safe(input.trace) << ": " << terminal_safe(input.error) << '\n';
}

nlohmann::json fleet_document(const FleetView& view, const std::vector<UnreadableTrace>& unreadable) {
  nlohmann::json document = fleet_json(view);
  nlohmann::json inputs = nlohmann::json::array();
  for (const UnreadableTrace& input : unreadable) inputs.push_back({{"trace", input.trace}, {"error", input.error}});
  document["unreadable"] = inputs;
  return document;
}

void print_json_document(const nlohmann::json& document) {
  std::cout << json_terminal_safe(document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
}

int fleet_exit_status(const std::vector<UnreadableTrace>& unreadable) {
  return unreadable.empty() ? kExitOk : kExitBadInput;
}

}  // namespace memtrace
