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
// disk I/O); anything else is a new file created with mode 0600, refusing to overwrite an existing file or
// follow a symlink. Returns null on failure, with errno set.
Sink* sink_open(const char* path);

class TraceWriter {
 public:
  // Takes ownership of `sink`, writes the file header. False on failure.
  bool begin(Sink* sink, size_t max_chunk_bytes);
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
