// The tracer's settings, read once from MEMTRACE_* environment variables when the first CUDA call is seen.
// README.md documents each variable; keep the two in step.
#pragma once
#include <cstddef>
#include <cstdint>

#include "record/schema.h"

namespace memtrace {

// Native frames kept per stack unless MEMTRACE_MAX_FRAMES says otherwise. Why 32: the frames beyond the 32nd
// from an allocation are the thread's start (the autograd engine's worker loop, the interpreter's entry) and say
// nothing about where memory goes, while the Python frames are read from the interpreter and kept in full however
// deep the native unwind stops. They are also the dearest to unwind: on the GPU machine's training loop
// (scripts/gpu-phase-cycles, docs/performance.md) 64 frames took 912 ns of stack capture per event (47 frames
// unwound on average) and 32 took 668 ns (36 frames).
constexpr uint32_t kDefaultMaxNativeFrames = 32;

// Native frames kept per stack on a thread that is running Python (its Python frames are read and kept in full)
// unless MEMTRACE_MAX_FRAMES_PYTHON, or MEMTRACE_MAX_FRAMES, says otherwise. Why fewer: there the Python frames
// name the call site and the innermost native frames the operator (in PyTorch: the allocator, the empty/kernel
// wrapper and the op's implementation, about 16 frames), while the frames beyond are the dispatcher's layers, the
// Python binding and the interpreter's glue between Python calls. On the GPU machine's training loop, 16 native
// frames under Python instead of 32 took the hook from 1,263-1,329 to 1,149-1,175 ns an event by the tracer's
// own cycle counts (scripts/gpu-phase-cycles, the two settings alternating; docs/performance.md). Threads without
// Python frames (PyTorch's autograd engine, a C++ program), and every thread where Python frames are not read
// (MEMTRACE_PYTHON_FRAMES=0, a CPython without a frame reader), keep kDefaultMaxNativeFrames: their native frames
// are all the context there is.
constexpr uint32_t kDefaultMaxNativeFramesWithPython = 16;

struct Config {
  char output_path[4096];             // MEMTRACE_OUTPUT after placeholder expansion
  uint32_t flush_interval_ms;         // MEMTRACE_FLUSH_MS, default 200
  uint32_t max_native_frames;         // MEMTRACE_MAX_FRAMES, default kDefaultMaxNativeFrames, at most 256
  uint32_t max_native_frames_python;  // on a thread with Python frames: MEMTRACE_MAX_FRAMES_PYTHON, else
                                      // MEMTRACE_MAX_FRAMES where set, else kDefaultMaxNativeFramesWithPython
  bool python_frames;                 // MEMTRACE_PYTHON_FRAMES, default 1 (a boolean: see config_bool)
  size_t buffer_bytes;                // MEMTRACE_BUFFER_MB (each of the two chunk buffers), default 8 MiB
  bool quiet;                         // MEMTRACE_QUIET=1: no line on stderr when the trace starts or ends
  bool redact_args;                   // MEMTRACE_REDACT_ARGS=1: the command line is not recorded; a value that is not
                     // a boolean also redacts (the user asked for something: privacy is the safe guess)
  // MEMTRACE_START=dormant: at the first CUDA call the tracer keeps the live set only and serves the control
  // endpoint until `memtrace attach` (docs/attach.md); =now (the default) traces from the first call. A value that
  // is neither is dormant, with one warning line: in production, writing no file is the safe guess.
  bool start_dormant;
  bool wait_when_full;  // MEMTRACE_FULL_BUFFER=wait: an event that finds both buffers full waits for the
                        // writer instead of being dropped (=drop, the default)
  // The process's place in its job (TraceStart.rank ... job_id_source in memtrace.proto), read from the
  // launcher's variables, not ours: RANK, LOCAL_RANK, WORLD_SIZE (kNoJobNumber when unset or not a whole number
  // below 2^32; said nowhere, they are not our settings), and SLURM_JOB_ID, else TORCHELASTIC_RUN_ID.
  int64_t rank;
  int64_t local_rank;
  int64_t world_size;
  char job_id[256];  // empty when neither is set; a longer value is cut at a UTF-8 character
  JobIdSource job_id_source;
};

constexpr int64_t kNoJobNumber = -1;

// Reads the environment. Never fails: bad values fall back to the defaults (MEMTRACE_REDACT_ARGS to redacting),
// each said in one line on stderr of the form `memtrace: NAME="VALUE" is not ...; using FALLBACK`.
void config_load(Config* out);

// Reads the boolean setting `name`: 1, true, yes, on and 0, false, no, off, in any case. Unset or empty gives
// `unset_value`; anything else gives `unreadable_value` and one warning line on stderr, which adds `because`
// when it is not null (why that fallback: "the command line is not recorded").
bool config_bool(const char* name, bool unset_value, bool unreadable_value, const char* because = nullptr);

// Expands %p (pid), %h (host name), %r (rank: $RANK, else $LOCAL_RANK, else 0) and %% in `pattern`.
// Default pattern, when MEMTRACE_OUTPUT is unset or empty: "memtrace-%h-%p.mtrace" in the working directory.
// Returns false when the result does not fit in `out_size` bytes.
bool config_expand_output(const char* pattern, int pid, const char* host, char* out, size_t out_size);

}  // namespace memtrace
