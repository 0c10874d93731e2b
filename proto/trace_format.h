// The framing of a .mtrace file: the constants of what surrounds the Record messages of memtrace.proto,
// shared by the writer (preload/record/trace_writer.cc) and every reader (analyzer/read/trace_reader.cc, the bench
// generators, the fuzzers, tests/analyzer/trace_builder.h; tests/e2e/trace_file.py parses the lines below).
// Plain constexpr and <cstdint> only: the tracer includes it, built without exceptions or a protobuf runtime.
//
// File layout (all integers little-endian; every byte of the file is a valid zstd stream, `zstd -dc` reads it):
//   header  one zstd skippable frame: u32 kHeaderFrameMagic, u32 payload size (kHeaderPayloadBytes; a reader
//           skips any payload beyond it), then the payload: the tag "MEMTRACE" (kHeaderTag), u32 format
//           version (kTraceFormatVersion when written; readers take kOldestTraceFormatVersion up to it), u32
//           reserved (0). kHeaderBytes in all.
//   chunks  any number of zstd frames (kZstdFrameMagic), each independent, content checksum on, each
//           decompressing to a sequence of Records of memtrace.proto, each preceded by its length as a
//           base-128 varint. A chunk never splits a record. An incomplete last chunk means the writer was cut
//           off; everything before it is complete.
// What each version changed: the comment atop memtrace.proto.
//
// tests/e2e/trace_file.py reads these with a regular expression: keep each constant on one line, of the form
// `inline constexpr TYPE NAME = VALUE;` with VALUE a number or, for kHeaderTag, a brace list of characters.
#pragma once

#include <cstdint>

namespace memtrace {

// The header: a skippable frame (RFC 8878, section 3.1.2: magic 0x184D2A50 to 0x184D2A5F) of the lowest magic.
inline constexpr uint32_t kHeaderFrameMagic = 0x184D2A50;
inline constexpr uint32_t kHeaderPayloadBytes = 16;
inline constexpr uint32_t kHeaderBytes = 24;  // frame magic, payload size, payload
inline constexpr char kHeaderTag[8] = {'M', 'E', 'M', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kHeaderTagOffset = 8;       // file offset of kHeaderTag
inline constexpr uint32_t kHeaderVersionOffset = 16;  // file offset of the u32 format version

// Format versions: the tracer writes kTraceFormatVersion; readers read kOldestTraceFormatVersion to it.
inline constexpr uint32_t kTraceFormatVersion = 3;
inline constexpr uint32_t kOldestTraceFormatVersion = 1;
// From this version on, times are whole microseconds (Event.time_delta_us) and the allocator totals that
// follow from the previous TORCH_ALLOCATOR event are left out (derived by the reader).
inline constexpr uint32_t kFirstDerivedTotalsVersion = 2;
// From this version on, an Event's sticky fields carry over from the previous Event (see Event in memtrace.proto).
inline constexpr uint32_t kFirstStickyFieldsVersion = 3;

// zstd's frame magics (RFC 8878, section 3.1): a chunk's, and the mask that matches every skippable frame's.
inline constexpr uint32_t kZstdFrameMagic = 0xFD2FB528;
inline constexpr uint32_t kSkippableMagicMask = 0xFFFFFFF0;

// Writes the header frame of a trace of format `version` into out[0, kHeaderBytes): what the tracer writes
// first, and what tests and generators that build traces write.
constexpr void encode_header_frame(uint32_t version, uint8_t* out) {
  const uint32_t words[] = {kHeaderFrameMagic, kHeaderPayloadBytes};
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < 4; i++) out[4 * w + i] = static_cast<uint8_t>(words[w] >> (8 * i));
  for (uint32_t i = 0; i < sizeof kHeaderTag; i++) out[kHeaderTagOffset + i] = static_cast<uint8_t>(kHeaderTag[i]);
  for (int i = 0; i < 4; i++) out[kHeaderVersionOffset + i] = static_cast<uint8_t>(version >> (8 * i));
  for (uint32_t i = kHeaderVersionOffset + 4; i < kHeaderBytes; i++) out[i] = 0;  // reserved
}

}  // namespace memtrace
