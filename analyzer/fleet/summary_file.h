// Reading back `memtrace summary --json` documents for `memtrace merge` (docs/many-processes.md): a document of
// one trace or of many has a `processes` list of process_summary_json entries, which make the processes again.
#pragma once

#include <string>
#include <vector>

#include "fleet/process_summary.h"

namespace memtrace {

// The processes of the summary document at `path`, in its order. Throws std::runtime_error saying what is wrong
// without the file's name (the caller adds it): "cannot be read: <reason>", "not JSON: <parser's words>", "not a
// summary --json document: no processes list", "processes[3]: <what process_summary_from_json says>".
std::vector<ProcessSummary> read_summary_file(const std::string& path);

}  // namespace memtrace
