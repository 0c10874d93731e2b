// What the commands that read many processes share (`summary`, `leaks`, `oom` with several TRACEs or a directory,
// and `merge`): reading the traces into a FleetView, the one line of an input that does not read, the --json
// document of a FleetView with the inputs that did not read, and its output.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/report_session.h"
#include "fleet/fleet.h"
#include "fleet/read_many.h"

namespace memtrace {

// Whether a report command's TRACE... name many processes: more than one path, or a directory.
bool names_many_traces(const ReportArgs& args);

// Many traces read: their view, and those that did not read (each already said on stderr).
struct FleetRead {
  FleetView view;
  std::vector<UnreadableTrace> unreadable;
  TextOptions options;  // --top, --all-frames as given
};

// Checks the options (UsageError), expands TRACE... (read_many.h: a path that names nothing is one unreadable
// input), reads every trace in parallel and builds the view. Each input that does not read gets its one line on
// stderr here; the caller reports the others and ends with fleet_exit_status.
// `combined_points`: the points of each shared GPU's combined timeline (add_combined_timelines; the text and JSON
// reports give only its peaks, the HTML report draws it).
FleetRead read_fleet(const ReportArgs& args, size_t combined_points = 2);

// Prints `memtrace: <path>: <error>` on stderr (terminal-safe).
void print_unreadable(const UnreadableTrace& input);

// fleet_json(view) with "unreadable": [{"trace", "error"}] (docs/many-processes.md).
nlohmann::json fleet_document(const FleetView& view, const std::vector<UnreadableTrace>& unreadable);

// `document` on stdout as every --json report writes it (json_terminal_safe, two-space indent).
void print_json_document(const nlohmann::json& document);

// kExitOk, or kExitBadInput where an input did not read (the others were reported).
int fleet_exit_status(const std::vector<UnreadableTrace>& unreadable);

}  // namespace memtrace
