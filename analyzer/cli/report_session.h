// What the report commands (`summary`, `leaks`, `oom`) share before they print: their options, the analysis of
// the trace, and the resolver that turns its stacks into frames.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "cli/commands.h"
#include "stacks/frames.h"
#include "report/text/report_text.h"
#include "stacks/symbolizer.h"

namespace memtrace {

struct ReportSession {
  ParsedArgs args;
  TextOptions options;
  std::unique_ptr<Analysis> analysis;
  std::unique_ptr<Symbolizer> symbolizer;
  std::unique_ptr<FrameResolver> resolver;
  bool json() const { return args.has("--json"); }
};

// The directories of `--debug-paths DIR[:DIR...]`, in order, trailing slashes dropped (empty entries skipped).
// Throws UsageError for an entry that is not a directory, or for no directory at all.
std::vector<std::string> parse_debug_paths(const std::string& value);

// Parses `[--json] [--all-frames] [--top N] [--debug-paths DIR[:DIR...]] TRACE` and analyzes TRACE (with what was live at each peak
// when `with_live_at_peak`). Returns kExitOk, or kExitBadInput after printing the one error line when the
// trace cannot be read. Throws UsageError for a bad command line.
int open_report(const std::vector<std::string>& args, bool with_live_at_peak, ReportSession* session);

}  // namespace memtrace
