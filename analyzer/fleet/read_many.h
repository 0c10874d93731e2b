// Reading the traces of many processes: the TRACE arguments of a command expanded (files, and directories of
// traces), and each trace analyzed and reduced to its ProcessSummary (process_summary.h).
//
// Parallel and streaming: worker threads (one per core by default) each take the next trace, analyze it
// (analysis.h: one pass, memory bounded by its live allocations), keep only its summary (a few KiB) and drop the
// analysis before taking the next. So memory is the workers' analyses in flight plus the summaries, and grows
// neither with the events of a trace nor with the analyses of the traces read before.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "fleet/process_summary.h"

namespace memtrace {

// A TRACE argument that names nothing to read; what() is one line naming it ("DIR: no .mtrace files in it").
struct TraceArgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The traces `args` name, in order: a file is itself (whatever its name); a directory is every regular file
// directly in it whose name ends in ".mtrace" (the tracer's names: job.mtrace, job-4242.mtrace, job.1.mtrace), by
// name. A file named twice is read once. Throws TraceArgError for a path that does not exist or a directory
// without traces.
std::vector<std::string> expand_trace_args(const std::vector<std::string>& args);

struct ReadManyOptions {
  size_t threads = 0;     // worker threads; 0: one per core (std::thread::hardware_concurrency), at most the traces
  size_t top_leaks = 10;  // leak candidates kept per process
  std::vector<std::string> debug_dirs;  // symbol files (Symbolizer), for call sites without Python frames
};

// A trace that could not be read: its path and the reader's one-line reason (TraceError::what, with the byte
// offset where it has one).
struct UnreadableTrace {
  std::string trace;
  std::string error;
};

struct ReadManyResult {
  std::vector<ProcessSummary> processes;    // of the traces that read, in the order of `traces`
  std::vector<UnreadableTrace> unreadable;  // in the order of `traces`
};

// Reads every trace. A trace that does not read is listed in `unreadable` and the others are still read. The
// installed ReadProgress (read/read_progress.h), if any, is shown one bar over the bytes of all the traces
// (the per-file bars cannot be drawn from several threads) and reinstalled after.
ReadManyResult read_processes(const std::vector<std::string>& traces, const ReadManyOptions& options);

}  // namespace memtrace
