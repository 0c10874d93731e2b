// Where finished chunks go. A Sink takes bytes; TraceWriter compresses each chunk into one independent zstd
// frame (with checksum) behind the file header, so that the file can be read up to its last complete chunk
// at any moment, and runs the background thread that flushes every flush interval.
#pragma once
#include <cstddef>
#include <cstdint>

namespace memtrace {

// One destination for trace bytes, chosen at start from MEMTRACE_OUTPUT.
class Sink {
 public:
  virtual ~Sink() = default;
  // Writes all `n` bytes or returns false (errno tells why).
  virtual bool write(const void* data, size_t n) = 0;
};

// Creates the sink for `path`: "/dev/null" gives a sink that discards (measuring the tracer's cost without
// disk I/O); anything else is a new file created with mode 0600 that never overwrites an existing file or
// follows a symlink: when the name is taken (a fixed name used twice, a reused pid, an exec in the same
// pid) the next free one of "<stem>.1.mtrace", "<stem>.2.mtrace", ... is used. The name chosen is written
// to `chosen` (`chosen_size` bytes). Returns null on failure, with errno set.
Sink* sink_open(const char* path, char* chosen, size_t chosen_size);

// Why `path` cannot take a trace, as the end of a sentence for the user; null when it can. Refused, once
// symlinks are followed: a directory (MEMTRACE_OUTPUT=/tmp); anything else that is not a regular file (a terminal
// or pipe behind /dev/stdout, a device, a FIFO, a socket) except /dev/null; and the file the job's standard input,
// output or error is (/dev/stdout with the output redirected to a file). The tracer never writes into an existing
// name, so it would otherwise have traced into a surprising file beside it ("/tmp.1", "/dev/stdout.1").
const char* sink_refusal(const char* path);

// The i-th alternative name for `path` (i >= 1): the suffix goes before a final ".mtrace", else at the end.
// False when it does not fit in `out_size` bytes.
bool sink_alternative_name(const char* path, int i, char* out, size_t out_size);

class TraceWriter {
 public:
  // Takes ownership of `sink`, writes the file header. False on failure.
  bool begin(Sink* sink, size_t max_chunk_bytes);
  // Closes the file (detach, the end of a snapshot); begin() may open another.
  void end();
  // Compresses `n` bytes of records into one zstd frame and writes it. False on failure.
  bool write_chunk(const uint8_t* records, size_t n);
  // Starts the thread that calls `flush` every `interval_ms` until stop_thread(). False if it could not start.
  bool start_thread(void (*flush)(), uint32_t interval_ms);
  // Asks the thread to flush soon (a buffer is filling up). Safe from any thread.
  void wake();
  // Stops and joins the thread (its last flush included).
  void stop_thread();
  // Forgets the thread without joining it (a forked child has none).
  void forget_thread();

 private:
  Sink* sink_ = nullptr;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  uint8_t* frame_ = nullptr;
  size_t frame_capacity_ = 0;
};

}  // namespace memtrace
