// What the report commands (`summary`, `leaks`, `oom`) share before they print: their options, the analysis of
// the trace, and the resolver that turns its stacks into frames.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/phases.h"
#include "cli/commands.h"
#include "report/text/report_text.h"
#include "stacks/frames.h"
#include "stacks/symbolizer.h"

namespace memtrace {

// The report commands' command line: TRACE [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]].
// --top and --debug-paths are kept as given (checked by open_report); unset when not given.
struct ReportArgs {
  TraceArg trace;                   // the first TRACE
  std::vector<std::string> traces;  // every TRACE, where the command takes many (summary, leaks, oom)
  bool json = false;
  bool all_frames = false;
  std::optional<std::string> top;
  std::optional<std::string> debug_paths;
};

// Declares ReportArgs' options on a report command; `top_help` says what --top counts for this command. With
// `many_traces`, TRACE takes one path or more (add_traces).
void add_report_options(CLI::App& command, ReportArgs* args, const std::string& top_help, bool many_traces = false);

struct ReportSession {
  TextOptions options;
  std::unique_ptr<Analysis> analysis;
  std::unique_ptr<Symbolizer> symbolizer;
  std::unique_ptr<FrameResolver> resolver;
};

// The directories of `--debug-paths DIR[:DIR...]`, in order, trailing slashes dropped (empty entries skipped).
// Throws UsageError for an entry that is not a directory, or for no directory at all.
std::vector<std::string> parse_debug_paths(const std::string& value);

// Checks `args` and analyzes its TRACE (with what was live at each peak when `with_live_at_peak`). Returns
// kExitOk, or kExitBadInput after printing the one error line when the trace cannot be read. Throws UsageError
// for a bad value on the command line.
int open_report(const ReportArgs& args, bool with_live_at_peak, ReportSession* session);

// Writes the file `output` through `write`, for the commands that write a file (export, report): into a new file
// beside it, renamed over it once complete, or in place where `output` is a device or a pipe. Where `output` is the
// trace at `trace` itself, cannot be written, or `write` throws TraceError (the trace no longer reads), prints the
// one line (with the system's reason) and returns kExitBadInput, leaving `output` as it was; else kExitOk.
int write_output_file(const std::string& output, const std::string& trace,
                      const std::function<void(std::ostream& out)>& write);

// The same for an output written from many traces (none of which `output` may be): `write` returns kExitOk, or
// another exit status once it has printed why it failed, and the output is then left as it was.
int write_output_file(const std::string& output, const std::vector<std::string>& traces,
                      const std::function<int(std::ostream& out)>& write);

// Writes the file `output` through `write`, for a format written by a library that opens the file by its name (the
// sqlite export's database), from the traces at `traces`: `write` is given a new name beside `output` to create the
// file at, and returns kExitOk, or another exit status once it has printed why it failed. Renamed over `output` once
// `write` succeeded; removed otherwise, leaving `output` as it was. Where `output` is one of the traces, a directory
// or anything but a regular file, prints the one line and returns kExitBadInput without calling `write`.
int write_output_database(const std::string& output, const std::vector<std::string>& traces,
                          const std::function<int(const std::string& new_file)>& write);

// For a file written from a truncated trace: one line on stderr saying that `what` ("the export", "the report")
// holds the trace up to its last complete chunk. Nothing for a complete trace.
void warn_if_truncated(const Analysis& analysis, const std::string& what);

// The job's iterations and the phase of each event (analysis/iterations.h, from the trace's Python frames and
// NVTX ranges), for `peak`. Reads the trace once more; throws TraceError where it no longer reads.
EventPhases event_phases_of(const Analysis& analysis, FrameResolver& resolver);

}  // namespace memtrace
