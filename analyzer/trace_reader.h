// Streaming reader for .mtrace files (layout in proto/memtrace.proto): checks the header frame, then
// decodes one zstd frame ("chunk") at a time and hands each Record to a callback, in file order.
// Memory never grows with the number of events: a chunk that declares at most 64 MiB of content (the
// tracer's, 8 MiB by default) is decompressed whole, in one pass, into a buffer reused from chunk to
// chunk; a larger one streams through zstd's window, records parsed as it decompresses.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "memtrace.pb.h"

namespace memtrace {

// A file that is not a trace or is damaged before its last chunk. `byte_offset` is the file offset the
// problem was found at (the header field, or the start of the bad chunk).
class TraceError : public std::runtime_error {
 public:
  TraceError(const std::string& what, uint64_t byte_offset)
      : std::runtime_error(what), byte_offset_(byte_offset) {}
  uint64_t byte_offset() const { return byte_offset_; }

 private:
  uint64_t byte_offset_;
};

// What a complete read found. A trace whose last chunk is cut off (the writer was killed) is not an
// error: the complete chunks are delivered and `truncated` is set.
struct TraceReadSummary {
  uint32_t format_version = 0;
  uint64_t records = 0;
  uint64_t records_with_invalid_text = 0;  // kept with invalid UTF-8 bytes replaced by '?'
  uint64_t chunks = 0;
  bool truncated = false;
  uint64_t complete_bytes = 0;  // file offset one past the last complete chunk
  uint64_t file_bytes = 0;
};

// The header skippable frame: magic 0x184D2A50, payload "MEMTRACE" + u32 version + u32 reserved.
inline constexpr uint32_t kHeaderFrameMagic = 0x184D2A50;
// Versions read: 1 and 2 (their differences: proto/memtrace.proto).
inline constexpr uint32_t kOldestTraceFormatVersion = 1;
inline constexpr uint32_t kTraceFormatVersion = 2;
inline constexpr char kHeaderTag[8] = {'M', 'E', 'M', 'T', 'R', 'A', 'C', 'E'};

// The tracer's chunks are at most its buffer size (MEMTRACE_BUFFER_MB <= 4096, preload/config.cc); a
// frame that declares or decompresses to more is corrupt. Memory does not depend on it (a chunk this
// large streams), it bounds the work one damaged frame can cause.
inline constexpr uint64_t kMaxChunkBytes = 4ull << 30;
// The tracer's records are a few KiB at most (stacks of <= 384 frames, a command line of <= 8 KiB);
// a length prefix above this is damage, not a record, and is refused before anything is allocated.
inline constexpr uint64_t kMaxRecordBytes = 16ull << 20;
// The tracer compresses at level 3, whose window is at most 2 MiB (2^21). zstd allocates the window a
// frame header asks for; a frame asking for more than 2^24 bytes (16 MiB) is refused instead.
inline constexpr int kMaxWindowLog = 24;

using RecordCallback = std::function<void(const proto::Record&)>;

// Reads the trace at `path`, calling `on_record` for every record of every complete chunk.
// A chunk is decoded only once all its bytes are in the file (its extent is measured from the zstd
// block headers first), so a cut-off last chunk delivers none of its records.
// Records are handed on as a version-1 trace would give them (derived_fields.h fills in what version 2
// leaves out).
// Throws TraceError for: unreadable file, empty file, bad magic, unknown version, a corrupt chunk,
// a record that does not parse, is empty or is longer than kMaxRecordBytes, a version-2 event that
// leaves out an allocator total with nothing to derive it from. Records of a complete but corrupt chunk
// may have been delivered before the error. Exceptions thrown by `on_record` propagate unchanged.
TraceReadSummary read_trace(const std::string& path, const RecordCallback& on_record);

}  // namespace memtrace
