// Streaming reader for .mtrace files (layout in proto/memtrace.proto): checks the header frame, then
// decodes one zstd frame ("chunk") at a time and hands each Record to a callback, in file order.
// Memory is bounded by the largest chunk, never by the number of events.
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
inline constexpr uint32_t kTraceFormatVersion = 1;
inline constexpr char kHeaderTag[8] = {'M', 'E', 'M', 'T', 'R', 'A', 'C', 'E'};

// No writer chunk comes near this (chunks are flushed every few hundred ms); a frame that decompresses
// to more is treated as corrupt rather than allowed to exhaust memory.
inline constexpr uint64_t kMaxChunkBytes = 1ull << 30;

using RecordCallback = std::function<void(const proto::Record&)>;

// Reads the trace at `path`, calling `on_record` for every record of every complete chunk.
// Throws TraceError for: unreadable file, empty file, bad magic, unknown version, a corrupt chunk,
// a record that does not parse. Exceptions thrown by `on_record` propagate unchanged.
TraceReadSummary read_trace(const std::string& path, const RecordCallback& on_record);

}  // namespace memtrace
