// The tracer's settings, read once from MEMTRACE_* environment variables when the first CUDA call is seen.
// README.md documents each variable; keep the two in step.
#pragma once
#include <cstddef>
#include <cstdint>

namespace memtrace {

struct Config {
  char output_path[4096];      // MEMTRACE_OUTPUT after placeholder expansion
  uint32_t flush_interval_ms;  // MEMTRACE_FLUSH_MS, default 200
  uint32_t max_native_frames;  // MEMTRACE_MAX_FRAMES, default 64, at most 256
  bool python_frames;          // MEMTRACE_PYTHON_FRAMES, default 1
  size_t buffer_bytes;         // MEMTRACE_BUFFER_MB (each of the two chunk buffers), default 8 MiB
  bool quiet;                  // MEMTRACE_QUIET=1: no line on stderr when the trace starts
  bool redact_args;            // MEMTRACE_REDACT_ARGS=1: the command line is not recorded
  bool wait_when_full;         // MEMTRACE_FULL_BUFFER=wait: an event that finds both buffers full waits for the
                               // writer instead of being dropped (=drop, the default)
};

// Reads the environment. Never fails: bad values fall back to the defaults.
void config_load(Config* out);

// Expands %p (pid), %h (host name), %r (rank: $RANK, else $LOCAL_RANK, else 0) and %% in `pattern`.
// Default pattern, when MEMTRACE_OUTPUT is unset or empty: "memtrace-%h-%p.mtrace" in the working directory.
// Returns false when the result does not fit in `out_size` bytes.
bool config_expand_output(const char* pattern, int pid, const char* host, char* out, size_t out_size);

}  // namespace memtrace
