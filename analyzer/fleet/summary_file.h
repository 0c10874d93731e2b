// Reading back `memtrace summary --json` documents for `memtrace merge` (docs/many-processes.md): a document of
// one trace or of many has a `processes` list of process_summary_json entries, which make the processes again.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fleet/process_summary.h"

namespace memtrace {

struct SummaryFile {
  std::vector<ProcessSummary> processes;  // in the document's order
  // The document's own `unreadable` list: traces its writer could not read (a fleet summary of a directory with a
  // damaged trace). Carried on, so that a merge does not lose the ranks that are missing.
  std::vector<std::pair<std::string, std::string>> unreadable;  // (trace, error)
};

// The summary document at `path`. Throws std::runtime_error saying what is wrong without the file's name (the
// caller adds it): "cannot be read: <reason>", "is a directory: ...", "a trace, not a summary: ...", "not JSON:
// <parser's words>", "not a summary --json document: no processes list", "processes[3]: <what
// process_summary_from_json says>", "unreadable[0]: not {trace, error}".
SummaryFile read_summary_file(const std::string& path);

}  // namespace memtrace
