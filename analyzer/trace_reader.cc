#include "trace_reader.h"

#include "utf8_repair.h"

#include <zstd.h>

// The runtime logs every refused record to stderr; the reader reports problems itself, in one line.
#if __has_include(<google/protobuf/stubs/logging.h>)
#include <google/protobuf/stubs/logging.h>
#define MEMTRACE_HAVE_LOG_SILENCER 1
#endif

#include <cerrno>
#include <climits>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace memtrace {
namespace {

constexpr size_t kHeaderBytes = 8 + 16;  // skippable frame header (magic + size) + payload
constexpr size_t kReadBlockBytes = 1 << 20;

uint32_t load_le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

struct DStreamFree {
  void operator()(ZSTD_DStream* s) const { ZSTD_freeDStream(s); }
};

// Checks the header frame and returns the format version. Leaves the file positioned after the header
// (and after any payload bytes beyond the 16 this version defines).
uint32_t read_header(FILE* f, uint64_t* offset) {
  unsigned char header[kHeaderBytes];
  size_t got = std::fread(header, 1, sizeof header, f);
  if (got == 0) throw TraceError("empty file, not a memtrace trace", 0);
  if (got < 8 || load_le32(header) != kHeaderFrameMagic)
    throw TraceError("not a memtrace trace (no memtrace header frame)", 0);
  uint32_t payload_bytes = load_le32(header + 4);
  if (payload_bytes < 16) throw TraceError("not a memtrace trace (header frame too short)", 4);
  if (got < kHeaderBytes) throw TraceError("truncated header frame", got);
  if (std::memcmp(header + 8, kHeaderTag, sizeof kHeaderTag) != 0)
    throw TraceError("not a memtrace trace (header tag is not \"MEMTRACE\")", 8);
  uint32_t version = load_le32(header + 16);
  if (version != kTraceFormatVersion)
    throw TraceError("unsupported trace format version " + std::to_string(version) +
                         " (this memtrace reads version " + std::to_string(kTraceFormatVersion) + ")",
                     16);
  // A later version may put more in the header payload; skip it, but only as far as the file goes.
  uint64_t extra = payload_bytes - 16;
  if (extra > 0) {
    std::vector<char> skipped(4096);
    for (uint64_t left = extra; left > 0;) {
      size_t want = size_t(std::min<uint64_t>(left, skipped.size()));
      if (std::fread(skipped.data(), 1, want, f) != want)
        throw TraceError("truncated header frame", kHeaderBytes + (extra - left));
      left -= want;
    }
  }
  *offset = kHeaderBytes + extra;
  return version;
}

// Parses one decompressed chunk: a sequence of (varint length, Record bytes).
// Parses one record; a record refused only for invalid UTF-8 in a text field is repaired and kept.
bool parse_record(const char* data, size_t length, proto::Record& record, std::string& scratch,
                  uint64_t* repaired) {
#ifdef MEMTRACE_HAVE_LOG_SILENCER
  google::protobuf::LogSilencer quiet;
#endif
  if (record.ParseFromArray(data, int(length))) return true;
  scratch.assign(data, length);
  if (repair_record_strings(scratch.data(), scratch.size()) == 0) return false;
  if (!record.ParseFromString(scratch)) return false;
  ++*repaired;
  return true;
}

void split_records(std::string_view chunk, uint64_t chunk_offset, proto::Record& record,
                   const RecordCallback& on_record, TraceReadSummary& summary) {
  std::string scratch;
  size_t pos = 0;
  uint64_t index = 0;
  while (pos < chunk.size()) {
    uint64_t length = 0;
    int shift = 0;
    while (true) {
      if (pos >= chunk.size() || shift > 63)
        throw TraceError("bad record length in chunk (record " + std::to_string(index) + ")",
                         chunk_offset);
      unsigned char byte = chunk[pos++];
      length |= uint64_t(byte & 0x7f) << shift;
      shift += 7;
      if (!(byte & 0x80)) break;
    }
    if (length > chunk.size() - pos)
      throw TraceError("record " + std::to_string(index) + " of a chunk runs past the chunk's end",
                       chunk_offset);
    if (length > uint64_t(INT32_MAX) ||
        !parse_record(chunk.data() + pos, length, record, scratch, &summary.records_with_invalid_text))
      throw TraceError("record " + std::to_string(index) + " of a chunk does not parse", chunk_offset);
    on_record(record);
    ++summary.records;
    ++index;
    pos += length;
  }
}

}  // namespace

TraceReadSummary read_trace(const std::string& path, const RecordCallback& on_record) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw TraceError(std::string("cannot open: ") + std::strerror(errno), 0);
  TraceReadSummary summary;
  uint64_t offset = 0;  // file offset of the next unconsumed compressed byte
  summary.format_version = read_header(file.get(), &offset);
  summary.complete_bytes = offset;

  std::unique_ptr<ZSTD_DStream, DStreamFree> stream(ZSTD_createDStream());
  ZSTD_initDStream(stream.get());
  std::vector<char> in_block(kReadBlockBytes);
  std::vector<char> out_block(ZSTD_DStreamOutSize());
  std::string chunk;
  proto::Record record;
  uint64_t chunk_offset = offset;
  bool in_frame = false;  // some bytes of the current frame have been consumed

  while (true) {
    size_t got = std::fread(in_block.data(), 1, in_block.size(), file.get());
    if (got == 0) {
      if (std::ferror(file.get())) throw TraceError("read error", offset);
      break;
    }
    ZSTD_inBuffer in{in_block.data(), got, 0};
    bool output_pending = false;  // the last call filled the output block: zstd may hold more
    while (in.pos < in.size || output_pending) {
      if (!in_frame) chunk_offset = offset + in.pos;
      ZSTD_outBuffer out{out_block.data(), out_block.size(), 0};
      size_t ret = ZSTD_decompressStream(stream.get(), &out, &in);
      if (ZSTD_isError(ret))
        throw TraceError(std::string("corrupt chunk: ") + ZSTD_getErrorName(ret), chunk_offset);
      in_frame = true;
      output_pending = ret != 0 && out.pos == out.size;
      if (chunk.size() + out.pos > kMaxChunkBytes)
        throw TraceError("chunk decompresses to more than " + std::to_string(kMaxChunkBytes) + " bytes",
                         chunk_offset);
      chunk.append(out_block.data(), out.pos);
      if (ret == 0) {  // frame complete and its checksum verified
        split_records(chunk, chunk_offset, record, on_record, summary);
        chunk.clear();
        in_frame = false;
        ++summary.chunks;
        summary.complete_bytes = offset + in.pos;
      }
    }
    offset += got;
  }
  summary.file_bytes = offset;
  summary.truncated = summary.complete_bytes != offset;
  return summary;
}

}  // namespace memtrace
