// Streaming reader for .mtrace files (layout in proto/memtrace.proto): checks the header frame, then
// decodes one zstd frame ("chunk") at a time and hands each record to a sink, in file order.
// Memory never grows with the number of events: a chunk that declares at most 64 MiB of content (the
// tracer's, 8 MiB by default) is decompressed whole, in one pass, into a buffer reused from chunk to
// chunk; a larger one streams through zstd's window, records parsed as it decompresses.
// Each read tells the installed ReadProgress (read_progress.h), if any, how far it has got, chunk by chunk.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "memtrace.pb.h"
#include "read/derived_fields.h"
#include "read/event_decoder.h"
#include "read/event_fields.h"
#include "trace_format.h"  // the header frame, the versions read (kOldestTraceFormatVersion to kTraceFormatVersion)

namespace memtrace {

// A file that is not a trace or is damaged before its last chunk. `byte_offset` is the file offset the
// problem was found at (the header field, or the start of the bad chunk), kWholeFile for what concerns the
// file as such (it cannot be opened, is a directory, is empty).
// `offset_in_what`: the message already says where (e.g. "a second trace begins at byte N"), so a report
// need not repeat it.
class TraceError : public std::runtime_error {
 public:
  static constexpr uint64_t kWholeFile = UINT64_MAX;
  TraceError(const std::string& what, uint64_t byte_offset, bool offset_in_what = false)
      : std::runtime_error(what), byte_offset_(byte_offset), offset_in_what_(offset_in_what) {}
  uint64_t byte_offset() const { return byte_offset_; }
  bool has_byte_offset() const { return byte_offset_ != kWholeFile; }
  bool offset_in_what() const { return offset_in_what_; }

 private:
  uint64_t byte_offset_;
  bool offset_in_what_;
};

// What a complete read found. A trace whose last chunk is cut off (the writer was killed) is not an
// error: the complete chunks are delivered and `truncated` is set. So is one whose end is zeros (the
// file's size was extended but its data never written: the machine stopped) or bytes that are not a
// chunk, when no complete chunk follows them.
struct TraceReadSummary {
  uint32_t format_version = 0;
  uint64_t records = 0;
  uint64_t records_with_invalid_text = 0;  // kept with invalid UTF-8 bytes replaced by '?'
  uint64_t chunks = 0;
  bool truncated = false;
  uint64_t complete_bytes = 0;  // file offset one past the last complete chunk
  uint64_t file_bytes = 0;
  // When truncated, what the bytes from complete_bytes to the end of the file are, said for a person
  // ("a chunk cut off after 1200 bytes", "4096 bytes of zeros (...)"); empty otherwise.
  std::string tail;
};

// The tracer's chunks are at most its buffer size (MEMTRACE_BUFFER_MB <= 4096, preload/record/config.cc); a
// frame that declares or decompresses to more is corrupt. Memory does not depend on it (a chunk this
// large streams), it bounds the work one damaged frame can cause.
inline constexpr uint64_t kMaxChunkBytes = 4ull << 30;
// The tracer's records are a few KiB at most (stacks of <= 384 frames, a command line of <= 8 KiB);
// a length prefix above this is damage, not a record, and is refused before anything is allocated.
inline constexpr uint64_t kMaxRecordBytes = 16ull << 20;
// The tracer compresses at level 3, whose window is at most 2 MiB (2^21). zstd allocates the window a
// frame header asks for; a frame asking for more than 2^24 bytes (16 MiB) is refused instead.
inline constexpr int kMaxWindowLog = 24;

// What read_trace hands records to: `sink.on_event(const EventFields&)` for every Event (the file's,
// with what versions 2 and 3 leave out filled in), `sink.on_record(const proto::Record&)` for every other
// record, in file order. Each reference is valid only during the call. A sink that never reads an Event's
// allocator_allocated_bytes may say so with `static constexpr bool kReadsAllocatorAllocatedBytes = false`:
// it then gets that total only where the file wrote it (derived_fields.h), for fewer instructions per event.
template <typename Sink>
concept TraceSink = requires(Sink& sink, const EventFields& event, const proto::Record& record) {
  sink.on_event(event);
  sink.on_record(record);
};

// Whether `Sink` reads allocator_allocated_bytes: true unless it declares otherwise (TraceSink above).
template <typename Sink>
constexpr bool sink_reads_allocator_allocated_bytes() {
  if constexpr (requires { Sink::kReadsAllocatorAllocatedBytes; }) {
    return Sink::kReadsAllocatorAllocatedBytes;
  } else {
    return true;
  }
}

// Reads the trace at `path`, handing every record of every complete chunk to `sink`.
// A chunk is decoded only once all its bytes are in the file (its extent is measured from the zstd
// block headers first), so a cut-off last chunk delivers none of its records.
// Records are handed on as a version-1 trace would give them (derived_fields.h fills in what version 2
// leaves out; the decoder, version 3's sticky fields, before that, as the totals' derivation keys on an
// Event's api and device).
// A file that holds two traces one after the other (joined with cat: a second header frame, or a second
// TraceStart record) is refused at the second one's chunk, as it would read as one process.
// Only a regular file is opened (a FIFO, device or socket is refused before anything blocks on it).
// Throws TraceError for: unreadable file, empty file, bad magic, unknown version, a corrupt chunk,
// a record that does not parse, is empty or is longer than kMaxRecordBytes, a version-2 or -3 event that
// leaves out an allocator total with nothing to derive it from. Records of a complete but corrupt chunk
// may have been delivered before the error. Exceptions thrown by the sink propagate unchanged.
// A template so that the per-event path (split, decode, fill in, hand on) is one inlined loop with no
// call through a pointer per event.
template <typename Sink>
requires TraceSink<std::remove_reference_t<Sink>> TraceReadSummary read_trace(const std::string& path, Sink&& sink);

// A TraceSink made of two callables, e.g. lambdas: `read_trace(path, SinkOf{on_event, on_record})`.
template <typename OnEvent, typename OnRecord>
struct SinkOf {
  OnEvent on_event;
  OnRecord on_record;
};
template <typename OnEvent, typename OnRecord>
SinkOf(OnEvent, OnRecord) -> SinkOf<OnEvent, OnRecord>;
// For a SinkOf that wants events only.
inline void ignore_record(const proto::Record&) {}

// The same, with every record (events included) as a proto::Record, for callers that want the message.
using RecordCallback = std::function<void(const proto::Record&)>;
TraceReadSummary read_trace(const std::string& path, const RecordCallback& on_record);

namespace trace_reader_detail {

// Where the reader puts a complete chunk's decompressed bytes, piece by piece, in file order.
class ChunkSink {
 public:
  virtual void begin_trace(uint32_t format_version) = 0;
  virtual void begin_chunk(uint64_t chunk_offset) = 0;
  virtual void feed(const char* data, size_t n) = 0;
  virtual void end_chunk() = 0;

 protected:
  ~ChunkSink() = default;
};

// Reads the file and decompresses every complete chunk into `chunks` (the whole of read_trace but the
// records). Returns the summary without the record counts.
TraceReadSummary read_chunks(const std::string& path, ChunkSink& chunks);

// Splits a chunk's decompressed bytes, as they come, into (varint length, Record bytes). Only a record
// that straddles two pieces of output is copied, so memory is one record. This base holds everything
// but the hand-off to the sink: the rare paths, out of line.
class RecordSplitterBase : public ChunkSink {
 public:
  void begin_trace(uint32_t format_version) final {
    derived_ = DerivedFields(format_version);
    carry_sticky_ = format_version >= kFirstStickyFieldsVersion;
    event_ = EventFields();  // before the file's first Event, every sticky field is 0
    seen_start_ = false;
  }
  void begin_chunk(uint64_t chunk_offset) final;
  void end_chunk() final;
  uint64_t records() const { return records_; }
  uint64_t records_with_invalid_text() const { return records_with_invalid_text_; }

 protected:
  [[noreturn]] void fail(const std::string& what) const;
  // Takes one byte of a record's length that is not the whole length (a longer one, or 0).
  void read_length_byte(unsigned char byte);
  // Parses a record decode_event_record refused with protobuf's parser, into `event_` (then true) or
  // `record_` (false). In version 3, a sticky field the Event leaves out keeps its value in `event_`. A
  // record refused only for invalid UTF-8 in a text field is repaired and kept.
  bool parse_generic(const char* data, size_t length);
  [[noreturn]] void fail_derived(const std::string& error) const;
  // A TraceStart record: refused when it is not the file's first (two traces joined).
  void note_start();

  DerivedFields derived_{kTraceFormatVersion};  // what version 2 leaves out, carried from record to record
  bool carry_sticky_ = false;                   // version 3: sticky fields carried from Event to Event, in `event_`
  // The last Event, as handed on: in version 3 the carried sticky fields' values (across chunks too).
  EventFields event_;
  proto::Record record_;
  std::string error_;
  std::string scratch_;
  std::string body_;  // the part of a record that straddles pieces of output
  uint64_t chunk_offset_ = 0;
  uint64_t index_ = 0;  // of the record in its chunk; added to records_ at the chunk's end
  uint64_t length_ = 0;
  int shift_ = 0;
  bool in_body_ = false;
  uint64_t records_ = 0;  // of the chunks ended
  uint64_t records_with_invalid_text_ = 0;
  bool seen_start_ = false;
};

template <TraceSink Sink>
class RecordSplitter final : public RecordSplitterBase {
 public:
  explicit RecordSplitter(Sink& sink) : sink_(sink) {}

  // Two copies of the split loop, one per way of reading sticky fields, chosen once per piece of
  // output: no test per event for the version.
  void feed(const char* data, size_t n) override {
    if (carry_sticky_) {
      feed_records</*kCarrySticky=*/true>(data, n);
    } else {
      feed_records</*kCarrySticky=*/false>(data, n);
    }
  }

 private:
  template <bool kCarrySticky>
  void feed_records(const char* data, size_t n) {
    size_t pos = 0;
    while (pos < n) {
      // Between records, those with a one-byte length (every event, nearly every record) wholly
      // inside this piece and followed by 9 more bytes of it are split here with the position in a
      // register and decoded without tests of their length or of the bytes after them
      // (decode_short_event_record); the steps below keep their state in members, for longer
      // lengths, the last records of a piece and records that straddle pieces. Both read a length
      // byte below 0x80 other than 0 as the whole length and hand on the same bytes.
      if (!in_body_ && shift_ == 0) {
        while (pos < n) {
          size_t length = static_cast<unsigned char>(data[pos]);
          size_t avail = n - pos - 1;
          if (length - 1 >= 0x7f || avail < length + kShortRecordReadableAfter) break;
          hand_on</*kShort=*/true, kCarrySticky>(data + pos + 1, length, avail - length);
          pos += 1 + length;
        }
        if (pos == n) break;
      }
      if (!in_body_) {
        unsigned char byte = static_cast<unsigned char>(data[pos++]);
        // A record shorter than 128 bytes (every event) has a one-byte length.
        if (shift_ == 0 && byte < 0x80 && byte != 0) {
          length_ = byte;
          in_body_ = true;
        } else {
          read_length_byte(byte);
        }
        continue;
      }
      size_t avail = n - pos;
      if (body_.empty() && avail >= length_) {  // the whole record is in this piece
        size_t length = size_t(length_);
        deliver<kCarrySticky>(data + pos, length, avail - length);
        end_record();
        pos += length;
        continue;
      }
      size_t take = std::min<size_t>(size_t(length_) - body_.size(), avail);
      body_.append(data + pos, take);
      pos += take;
      if (body_.size() == length_) {
        deliver<kCarrySticky>(body_.data(), body_.size(), 0);
        end_record();
        body_.clear();
      }
    }
  }

  // What decode_short_event_record needs after a record (event_decoder.h).
  static constexpr size_t kShortRecordReadableAfter = event_wire::kMaxVarintBytes - 1;

  // The general steps' records: out of line, so that only the split loop has hand_on's body.
  template <bool kCarrySticky>
  [[gnu::noinline]] void deliver(const char* data, size_t length, size_t readable_after) {
    hand_on</*kShort=*/false, kCarrySticky>(data, length, readable_after);
  }
  // `readable_after`: bytes after the record that may be read (decode_event_record). kShort: the
  // record is 1 to 127 bytes and readable_after at least kShortRecordReadableAfter, for
  // decode_short_event_record. Events, nearly every record of a trace, go through the decoder: the
  // generic parser was half of the analyzer's time per event (callgrind, docs/performance.md).
  // Inlined into the split loop: as a call it saved and restored six registers per event (about 20
  // instructions, callgrind).
  template <bool kShort, bool kCarrySticky>
  [[gnu::always_inline]] void hand_on(const char* data, size_t length, size_t readable_after) {
    bool decoded = kShort ? decode_short_event_record<kCarrySticky>(data, length, event_)
                          : decode_event_record<kCarrySticky>(data, length, event_, readable_after);
    if (decoded || parse_generic(data, length)) {
      if (!derived_.template fill<sink_reads_allocator_allocated_bytes<Sink>()>(event_, &error_)) {
        fail_derived(error_);
      }
      sink_.on_event(event_);
    } else {
      if (record_.kind_case() == proto::Record::kStart) note_start();
      derived_.fill(record_);
      sink_.on_record(record_);
    }
    ++index_;
  }
  void end_record() {
    in_body_ = false;
    length_ = 0;
  }

  Sink& sink_;
};

}  // namespace trace_reader_detail

template <typename Sink>
requires TraceSink<std::remove_reference_t<Sink>> TraceReadSummary read_trace(const std::string& path, Sink&& sink) {
  trace_reader_detail::RecordSplitter<std::remove_reference_t<Sink>> splitter(sink);
  TraceReadSummary summary = trace_reader_detail::read_chunks(path, splitter);
  summary.records = splitter.records();
  summary.records_with_invalid_text = splitter.records_with_invalid_text();
  return summary;
}

}  // namespace memtrace
