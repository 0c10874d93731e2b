// `memtrace export --format sqlite TRACE... -o FILE`: one SQLite database (Debian's libsqlite3) of one or many
// traces, each trace one process, for ad-hoc questions across the processes of a job with SQL (sqlite3, DuckDB,
// pandas). The tables (docs/commands/export.md, "sqlite", says every column and its unit):
//   processes  one row per trace: process_id (1, 2, ... in the order added: pids repeat across hosts and over
//              time), pid, ppid, host, rank, local_rank, world_size, job_id, argv, wall-clock start and end, trace
//   devices    per process, each device ordinal it used or described: the GPU's UUID, name, total memory, peaks
//   events     every event of every trace, shaped like Nsight Systems' CUDA_GPU_MEMORY_USAGE_EVENTS (start, a
//              process, a device, address, bytes, operation, memory kind) with what memtrace adds: layer, API,
//              stream, thread, stack, and the device's allocated and reserved totals after the event
//   stacks     (process_id, stack_id, depth, frame_id) for the stacks the events name, innermost frame at depth 0
//   frames     frame_id and the frame symbolized (kind, function, file, line, module, offset), one row per
//              distinct frame across all processes, so that the same line in two ranks is one frame_id
// Each trace is written in one transaction through prepared statements; memory stays that of one trace's
// analysis plus the distinct frames.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "export/export_source.h"

namespace memtrace {

// The database could not be created or written (disk full, a directory that is not writable): what SQLite said.
struct SqliteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SqliteExport {
 public:
  // Creates the database at `path`, with its tables. `path` must not exist yet or be an empty file (the caller
  // writes to a new name and renames it). Throws SqliteError.
  explicit SqliteExport(const std::string& path);
  ~SqliteExport();
  SqliteExport(const SqliteExport&) = delete;
  SqliteExport& operator=(const SqliteExport&) = delete;

  // Adds the trace of `source` as the next process: its processes and devices rows, every event (the trace is
  // read once more, streaming), and the stacks those events name with their frames. Returns its process_id.
  // Throws TraceError where the trace no longer reads, SqliteError where the database cannot be written; the
  // database is then unusable (the caller removes it).
  int64_t add_trace(const ExportSource& source);
  // Commits and closes the database. Throws SqliteError.
  void finish();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace memtrace
