// `memtrace merge SUMMARY.json... [--json] [--top N]`: the report of many processes (fleet.h) from `summary
// --json` documents, of one trace or of many (their `processes` lists), written where each rank's trace was:
// the figures that combine from summaries (docs/many-processes.md). A file that is not such a document gets its
// one line; the others are reported, and the exit status is 2.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/fleet_session.h"
#include "fleet/summary_file.h"
#include "report/text/fleet_text.h"

namespace memtrace {
namespace {

struct MergeArgs {
  std::vector<std::string> files;
  bool json = false;
  std::optional<std::string> top;
};

int merge(const MergeArgs& args) {
  if (args.files.empty()) throw UsageError("no SUMMARY file given");
  const size_t top = args.top ? parse_count("--top", *args.top) : 10;
  std::vector<ProcessSummary> processes;
  std::vector<UnreadableTrace> unreadable;
  for (const std::string& file : args.files) {
    try {
      SummaryFile summary = read_summary_file(file);
      for (ProcessSummary& p : summary.processes) processes.push_back(std::move(p));
      // Traces the summary's writer could not read stay missing here: said again, and the exit status says so.
      for (auto& [trace, error] : summary.unreadable) {
        unreadable.push_back({trace, error + " (unreadable in " + file + ")"});
        print_unreadable(unreadable.back());
      }
    } catch (const std::exception& e) {
      unreadable.push_back({file, e.what()});
      print_unreadable(unreadable.back());
    }
  }
  if (processes.empty() && !unreadable.empty()) return fleet_exit_status(unreadable);  // the lines said it
  const FleetView view = build_fleet(std::move(processes));
  if (args.json) print_json_document(fleet_document(view, unreadable));
  else print_fleet(std::cout, view, top);
  return fleet_exit_status(unreadable);
}

}  // namespace

RunCommand add_merge(CLI::App& memtrace) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* command =
      memtrace.add_subcommand("merge",
                              "the report of many processes from `summary --json` files written where each trace was");
  command
      ->add_option_function<std::vector<std::string>>(
          "SUMMARY", [args](const std::vector<std::string>& files) { args->files = files; },
          "`memtrace summary --json` documents, of one trace or of many")
      ->type_name("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_flag("--json", args->json, "the report as one JSON document instead of text");
  command
      ->add_option_function<std::string>(
          "--top", [args](const std::string& value) { args->top = value; }, "merged leak sites shown (default 10)")
      ->type_name("N");
  return [args] { return merge(*args); };
}

}  // namespace memtrace
