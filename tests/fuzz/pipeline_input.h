// The input format of the fuzz_pipeline target (and of the seeds make_pipeline_seed writes): a trace
// described as chunks of records, which the harness turns into an .mtrace file (header frame + one
// checksummed zstd frame per chunk), so that mutations of records reach the analysis instead of failing
// a checksum. Every byte string is some input (parse_input never fails), so byte-level mutations stay
// useful.
//
// Layout:
//   byte 0 == kRawFileInput: the rest is the .mtrace file as is (the reader's own checks: header, frames,
//     checksums, truncation).
//   otherwise: byte 0 is the header's format version (1 to 3 are read; others reach the version check),
//     byte 1 the flags (PipelineFlags), then chunks, each a little-endian u32 length and that many bytes
//     of decompressed chunk content (varint-length-delimited Record messages, memtrace.proto). A length
//     past the input's end takes what is left.
#pragma once

#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "trace_format.h"

namespace memtrace::fuzz {

inline constexpr uint8_t kRawFileInput = 0xFF;

// Bits of the flags byte.
inline constexpr uint8_t kTruncateLastChunk = 1 << 0;  // the last frame loses its second half (a cut-off writer)
inline constexpr uint8_t kAllFrames = 1 << 1;          // the reports' --all-frames
inline constexpr int kIntervalShift = 2;               // bits 2-3: which --interval (fuzz_pipeline.cc)
inline constexpr int kTopShift = 4;                    // bits 4-7: --top N (0 = the default)

// One chunk's content: the records (each a serialized proto::Record, or any bytes), then bytes that do
// not split into records (a bad length, a record running past the end), written after them as they are.
struct Chunk {
  std::vector<std::string> records;
  std::string tail;
};

struct PipelineInput {
  bool raw = false;
  std::string raw_file;  // raw only
  uint8_t version = 3;
  uint8_t flags = 0;
  std::vector<Chunk> chunks;
};

// Reads a base-128 varint at `*pos` of `bytes`; false (pos unchanged) if it is cut off or longer than 10 bytes.
inline bool read_varint(const std::string& bytes, size_t* pos, uint64_t* value) {
  uint64_t v = 0;
  for (size_t i = *pos, shift = 0; i < bytes.size() && shift < 70; ++i, shift += 7) {
    v |= uint64_t(uint8_t(bytes[i]) & 0x7f) << shift;
    if ((uint8_t(bytes[i]) & 0x80) == 0) {
      *pos = i + 1;
      *value = v;
      return true;
    }
  }
  return false;
}

inline void append_varint(std::string* out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out->push_back(char(uint8_t(v) | 0x80));
  out->push_back(char(v));
}

inline Chunk parse_chunk(const std::string& content) {
  Chunk chunk;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t at = pos;
    uint64_t length = 0;
    if (!read_varint(content, &at, &length) || length > content.size() - at) break;
    chunk.records.emplace_back(content, at, size_t(length));
    pos = at + size_t(length);
  }
  chunk.tail = content.substr(pos);
  return chunk;
}

inline std::string chunk_content(const Chunk& chunk) {
  std::string out;
  for (const std::string& record : chunk.records) {
    append_varint(&out, record.size());
    out += record;
  }
  return out + chunk.tail;
}

inline PipelineInput parse_input(const uint8_t* data, size_t size) {
  PipelineInput in;
  if (size > 0 && data[0] == kRawFileInput) {
    in.raw = true;
    in.raw_file.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
    return in;
  }
  if (size > 0) in.version = data[0];
  if (size > 1) in.flags = data[1];
  for (size_t pos = 2; pos < size;) {
    uint32_t length = 0;
    for (size_t i = 0; i < 4; ++i) length |= uint32_t(pos + i < size ? data[pos + i] : 0) << (8 * i);
    pos = std::min(size, pos + 4);
    size_t take = std::min<size_t>(length, size - pos);
    in.chunks.push_back(parse_chunk(std::string(reinterpret_cast<const char*>(data) + pos, take)));
    pos += take;
  }
  return in;
}

inline std::string serialize_input(const PipelineInput& in) {
  if (in.raw) return char(kRawFileInput) + in.raw_file;
  std::string out = {char(in.version), char(in.flags)};
  for (const Chunk& chunk : in.chunks) {
    std::string content = chunk_content(chunk);
    uint32_t n = uint32_t(content.size());
    for (int i = 0; i < 4; ++i) out.push_back(char(n >> (8 * i)));
    out += content;
  }
  return out;
}

// The .mtrace file the input describes (raw: the file itself): the header frame with the input's version,
// then one zstd frame (level 1, content checksum on) per chunk.
inline std::string trace_file(const PipelineInput& in) {
  if (in.raw) return in.raw_file;
  uint8_t header[kHeaderBytes];
  encode_header_frame(in.version, header);
  std::string file(reinterpret_cast<const char*>(header), sizeof header);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  size_t last_frame = file.size();
  for (const Chunk& chunk : in.chunks) {
    std::string content = chunk_content(chunk);
    std::string frame(ZSTD_compressBound(content.size()), '\0');
    size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), content.data(), content.size());
    if (ZSTD_isError(n)) std::abort();
    last_frame = file.size();
    file.append(frame.data(), n);
  }
  ZSTD_freeCCtx(cctx);
  if ((in.flags & kTruncateLastChunk) && !in.chunks.empty()) file.resize(last_frame + (file.size() - last_frame) / 2);
  return file;
}

}  // namespace memtrace::fuzz
