// What the commands that read many processes share (`summary`, `leaks`, `oom` with several TRACEs or a directory,
// and `merge`): the one line of an input that does not read, the --json document of a FleetView with the inputs
// that did not read, and its output.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fleet/fleet.h"

namespace memtrace {

// An input among many that did not read: its name, and what is wrong (without the name).
struct UnreadableInput {
  std::string path;
  std::string error;
};

// Prints `memtrace: <path>: <error>` on stderr (terminal-safe).
void print_unreadable(const UnreadableInput& input);

// fleet_json(view) with "unreadable": [{"trace", "error"}] (docs/many-processes.md).
nlohmann::json fleet_document(const FleetView& view, const std::vector<UnreadableInput>& unreadable);

// `document` on stdout as every --json report writes it (json_terminal_safe, two-space indent).
void print_json_document(const nlohmann::json& document);

// kExitOk, or kExitBadInput where an input did not read (the others were reported).
int fleet_exit_status(const std::vector<UnreadableInput>& unreadable);

}  // namespace memtrace
