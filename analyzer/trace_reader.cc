#include "trace_reader.h"

#include "derived_fields.h"
#include "event_decoder.h"
#include "utf8_repair.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

// The runtime logs every refused record to stderr; the reader reports problems itself, in one line.
#if __has_include(<google/protobuf/stubs/logging.h>)
#include <google/protobuf/stubs/logging.h>
#define MEMTRACE_HAVE_LOG_SILENCER 1
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace memtrace {
namespace {

constexpr size_t kHeaderBytes = 8 + 16;  // skippable frame header (magic + size) + payload
constexpr size_t kReadBlockBytes = 1 << 20;
// Frame format facts from the zstd format specification (RFC 8878, section 3.1).
constexpr uint32_t kZstdFrameMagic = 0xFD2FB528;
constexpr uint32_t kSkippableMagicMask = 0xFFFFFFF0;  // 0x184D2A50 ... 0x184D2A5F
constexpr size_t kBlockHeaderBytes = 3;
constexpr size_t kChecksumBytes = 4;
constexpr unsigned kBlockTypeRle = 1, kBlockTypeReserved = 3;
constexpr uint32_t kMaxBlockBytes = 128 << 10;  // ZSTD_BLOCKSIZE_MAX

uint64_t load_le(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}
uint32_t load_le32(const unsigned char* p) { return uint32_t(load_le(p, 4)); }

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

struct FdCloser {
  void operator()(int* fd) const {
    ::close(*fd);
    delete fd;
  }
};

struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

// Positioned reads of one open file of known size. Small reads (frame and block headers) go through a
// cache so that walking the block headers of a chunk costs one read per 64 KiB, not one per block.
class Input {
 public:
  Input(int fd, uint64_t size) : fd_(fd), size_(size) {}
  uint64_t size() const { return size_; }

  // Reads up to `n` bytes at `offset`; fewer only at the end of the file.
  size_t read_at(uint64_t offset, void* dst, size_t n) {
    if (offset >= size_) return 0;
    n = size_t(std::min<uint64_t>(n, size_ - offset));
    if (n > kCacheBytes) return read_direct(offset, static_cast<char*>(dst), n);
    if (offset < cache_offset_ || offset + n > cache_offset_ + cache_.size()) {
      cache_.resize(kCacheBytes);
      cache_.resize(read_direct(offset, cache_.data(), cache_.size()));
      cache_offset_ = offset;
    }
    size_t got = size_t(std::min<uint64_t>(n, cache_offset_ + cache_.size() - offset));
    std::memcpy(dst, cache_.data() + (offset - cache_offset_), got);
    return got;
  }

 private:
  static constexpr size_t kCacheBytes = 64 << 10;

  size_t read_direct(uint64_t offset, char* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, dst + done, n - done, off_t(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw TraceError(std::string("read error: ") + std::strerror(errno), offset + done);
      if (got == 0) break;  // the file shrank while being read
      done += size_t(got);
    }
    return done;
  }

  int fd_;
  uint64_t size_;
  std::vector<char> cache_;
  uint64_t cache_offset_ = 0;
};

// Checks the header frame and returns the format version; `*offset` is set to the first chunk.
uint32_t read_header(Input& in, uint64_t* offset) {
  unsigned char header[kHeaderBytes];
  size_t got = in.read_at(0, header, sizeof header);
  if (got == 0) throw TraceError("empty file, not a memtrace trace", TraceError::kWholeFile);
  if (got < 8 || load_le32(header) != kHeaderFrameMagic)
    throw TraceError("not a memtrace trace: no memtrace header frame", 0);
  uint32_t payload_bytes = load_le32(header + 4);
  if (payload_bytes < 16) throw TraceError("not a memtrace trace: header frame too short", 4);
  if (got < kHeaderBytes) throw TraceError("truncated header frame", got);
  if (std::memcmp(header + 8, kHeaderTag, sizeof kHeaderTag) != 0)
    throw TraceError("not a memtrace trace: header tag is not \"MEMTRACE\"", 8);
  uint32_t version = load_le32(header + 16);
  if (version < kOldestTraceFormatVersion || version > kTraceFormatVersion)
    throw TraceError("unsupported trace format version " + std::to_string(version) +
                         " (this memtrace reads versions " + std::to_string(kOldestTraceFormatVersion) + " to " +
                         std::to_string(kTraceFormatVersion) + ")",
                     16);
  // A later version may put more in the header payload: skip it, if the file has it.
  uint64_t end = 8 + uint64_t(payload_bytes);
  if (end > in.size()) throw TraceError("truncated header frame", in.size());
  *offset = end;
  return version;
}

// Where the frame at `offset` ends, from its headers alone. `complete` is false when the file ends
// before it does: a chunk the writer did not finish.
struct FrameExtent {
  bool complete = false;
  bool skippable = false;  // a skippable frame: no records
  uint64_t bytes = 0;
};

[[noreturn]] void corrupt(const std::string& what, uint64_t offset) {
  throw TraceError("corrupt chunk: " + what, offset);
}

// The few bytes left at the end of the file are the beginning of a frame magic (a cut), or garbage.
FrameExtent short_tail(const unsigned char* tail, size_t n, uint64_t offset) {
  const unsigned char zstd[4] = {0x28, 0xB5, 0x2F, 0xFD};
  const unsigned char skippable[4] = {0x50, 0x2A, 0x4D, 0x18};
  bool zstd_prefix = std::memcmp(tail, zstd, n) == 0;
  bool skippable_prefix = (tail[0] & 0xF0) == skippable[0] && std::memcmp(tail + 1, skippable + 1, n - 1) == 0;
  if (!zstd_prefix && !skippable_prefix) corrupt("not a zstd frame", offset);
  return FrameExtent{};
}

FrameExtent measure_frame(Input& in, uint64_t offset) {
  unsigned char head[18];  // the longest frame header: magic 4, descriptor 1, window 1, dictionary 4, size 8
  size_t got = in.read_at(offset, head, sizeof head);
  if (got < 4) return short_tail(head, got, offset);
  uint32_t magic = load_le32(head);
  if ((magic & kSkippableMagicMask) == kHeaderFrameMagic) {
    if (got < 8) return FrameExtent{};
    uint64_t bytes = 8 + uint64_t(load_le32(head + 4));
    return FrameExtent{offset + bytes <= in.size(), true, bytes};
  }
  if (magic != kZstdFrameMagic) corrupt("not a zstd frame", offset);
  if (got < 5) return FrameExtent{};
  unsigned descriptor = head[4];
  unsigned size_flag = descriptor >> 6;
  bool single_segment = descriptor & 0x20;
  if (descriptor & 0x08) corrupt("reserved bit set in the frame header", offset);
  if (descriptor & 0x03) corrupt("frame needs a dictionary", offset);
  if (!(descriptor & 0x04)) corrupt("frame has no content checksum", offset);
  size_t size_bytes = size_flag == 0 ? (single_segment ? 1 : 0) : size_t(1) << size_flag;
  size_t header_bytes = 5 + (single_segment ? 0 : 1) + size_bytes;
  if (got < header_bytes) return FrameExtent{};
  if (!single_segment && 10 + (head[5] >> 3) > kMaxWindowLog)
    corrupt("frame asks for a window of 2^" + std::to_string(10 + (head[5] >> 3)) + " bytes (at most 2^" +
                std::to_string(kMaxWindowLog) + " are allowed)",
            offset);
  if (size_bytes) {
    uint64_t content_bytes = load_le(head + header_bytes - size_bytes, size_bytes) + (size_bytes == 2 ? 256 : 0);
    if (content_bytes > kMaxChunkBytes)
      corrupt("frame declares " + std::to_string(content_bytes) + " bytes of content (a chunk has at most " +
                  mib(kMaxChunkBytes) + ")",
              offset);
    // A single-segment frame's window is its whole content.
    if (single_segment && content_bytes > (uint64_t(1) << kMaxWindowLog))
      corrupt("frame asks for a window of " + std::to_string(content_bytes) + " bytes (at most 2^" +
                  std::to_string(kMaxWindowLog) + " are allowed)",
              offset);
  }
  uint64_t pos = offset + header_bytes;
  while (true) {
    unsigned char block[kBlockHeaderBytes];
    if (in.read_at(pos, block, sizeof block) < sizeof block) return FrameExtent{};
    uint32_t value = uint32_t(load_le(block, sizeof block));
    bool last = value & 1;
    unsigned type = (value >> 1) & 3;
    uint32_t block_bytes = value >> 3;
    uint32_t stored_bytes = type == kBlockTypeRle ? 1 : block_bytes;
    if (type == kBlockTypeReserved) corrupt("reserved block type", offset);
    if (block_bytes > kMaxBlockBytes) corrupt("block of " + std::to_string(block_bytes) + " bytes", offset);
    pos += kBlockHeaderBytes + stored_bytes;
    if (last) break;
    if (pos >= in.size()) return FrameExtent{};
  }
  pos += kChecksumBytes;
  return FrameExtent{pos <= in.size(), false, pos - offset};
}

// The reader's input and output blocks. Growing one discards its bytes and leaves the new ones
// uninitialized: they are always written before they are read, and a zero-filled 8 MiB output block
// would cost more than the copies the larger block saves.
class ByteBuffer {
 public:
  char* data() { return bytes_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void resize_discarding(size_t n) {
    if (n == size_) return;
    bytes_.reset(new char[n]);
    size_ = n;
  }

 private:
  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0;
};

// When the whole frame fits in `in_block` and its declared content in `out_block`, ZSTD_decompressStream
// decodes it in one pass straight into `out_block` (zstd 1.5's single-pass shortcut) instead of block by
// block through its window and a copy out of it: 30-40 instructions per event fewer (callgrind). The
// buffers are grown to the frame for that when it declares at most kWholeFrameBytes of content (the
// tracer's chunks: MEMTRACE_BUFFER_MB, 8 MiB by default); larger frames stream through the buffers as
// they are, so memory stays bounded whatever the chunk size.
constexpr uint64_t kWholeFrameBytes = 64 << 20;

void make_room_for_whole_frame(Input& in, uint64_t offset, uint64_t bytes, ByteBuffer& in_block,
                               ByteBuffer& out_block) {
  if (bytes > kWholeFrameBytes) return;
  unsigned char head[18];  // the longest frame header, as in measure_frame
  size_t got = in.read_at(offset, head, sizeof head);
  unsigned long long content_bytes = ZSTD_getFrameContentSize(head, got);
  if (content_bytes == ZSTD_CONTENTSIZE_UNKNOWN || content_bytes == ZSTD_CONTENTSIZE_ERROR ||
      content_bytes > kWholeFrameBytes)
    return;
  if (in_block.size() < bytes) in_block.resize_discarding(size_t(bytes));
  if (out_block.size() < content_bytes) out_block.resize_discarding(size_t(content_bytes));
}

// Decompresses the complete frame [offset, offset + bytes) into `splitter` (or nowhere, to check the
// frame), checking its checksum.
void decode_frame(Input& in, uint64_t offset, uint64_t bytes, ZSTD_DCtx* dctx, trace_reader_detail::ChunkSink* splitter,
                  ByteBuffer& in_block, ByteBuffer& out_block) {
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  if (splitter) splitter->begin_chunk(offset);
  make_room_for_whole_frame(in, offset, bytes, in_block, out_block);
  uint64_t decoded_bytes = 0;
  uint64_t fed = 0;  // frame bytes read into in_block so far
  ZSTD_inBuffer zin{in_block.data(), 0, 0};
  while (true) {
    if (zin.pos == zin.size && fed < bytes) {
      size_t want = size_t(std::min<uint64_t>(bytes - fed, in_block.size()));
      if (in.read_at(offset + fed, in_block.data(), want) != want) throw TraceError("file shrank while read", offset + fed);
      zin = ZSTD_inBuffer{in_block.data(), want, 0};
      fed += want;
    }
    size_t consumed_before = zin.pos;
    ZSTD_outBuffer out{out_block.data(), out_block.size(), 0};
    size_t ret = ZSTD_decompressStream(dctx, &out, &zin);
    if (ZSTD_isError(ret)) corrupt(ZSTD_getErrorName(ret), offset);
    decoded_bytes += out.pos;
    if (decoded_bytes > kMaxChunkBytes) corrupt("frame decompresses to more than " + mib(kMaxChunkBytes), offset);
    if (splitter) splitter->feed(out_block.data(), out.pos);
    if (ret == 0) break;  // frame complete, checksum verified
    if (fed == bytes && zin.pos == zin.size && zin.pos == consumed_before && out.pos == 0)
      corrupt("frame ends inside a block", offset);
  }
  if (fed != bytes || zin.pos != zin.size) corrupt("frame ends before its last block", offset);
  if (splitter) splitter->end_chunk();
}

// The frame at `offset` runs past the end of the file. A writer that was cut off leaves a prefix of a
// valid frame, which decodes without error as far as it goes; damage in its headers (a block size
// that sends the frame past the end) does not, and is reported as damage rather than as a cut.
void check_cut_frame(Input& in, uint64_t offset, ZSTD_DCtx* dctx, ByteBuffer& in_block,
                     ByteBuffer& out_block) {
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  uint64_t decoded_bytes = 0;
  for (uint64_t pos = offset; pos < in.size();) {
    size_t got = in.read_at(pos, in_block.data(), in_block.size());
    if (got == 0) break;
    ZSTD_inBuffer zin{in_block.data(), got, 0};
    while (zin.pos < zin.size) {
      ZSTD_outBuffer out{out_block.data(), out_block.size(), 0};
      size_t ret = ZSTD_decompressStream(dctx, &out, &zin);
      if (ZSTD_isError(ret)) corrupt(ZSTD_getErrorName(ret), offset);
      decoded_bytes += out.pos;
      if (decoded_bytes > kMaxChunkBytes) corrupt("frame decompresses to more than " + mib(kMaxChunkBytes), offset);
      if (ret == 0) corrupt("frame ends before the length its block headers give", offset);
    }
    pos += got;
  }
}

// A cut leaves nothing after the beginning of the last frame but that frame. A complete, valid chunk
// further on means that this frame's block headers are damaged and send its end past the chunks that
// follow: damage to report, not a cut that would silently drop those chunks.
void check_no_later_chunk(Input& in, uint64_t offset, ZSTD_DCtx* dctx, ByteBuffer& in_block,
                          ByteBuffer& out_block) {
  const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};  // kZstdFrameMagic, little-endian
  std::vector<unsigned char> scan(64 << 10);
  for (uint64_t pos = offset + 1; pos + sizeof magic <= in.size();) {
    size_t got = in.read_at(pos, scan.data(), scan.size());
    if (got < sizeof magic) break;
    for (size_t i = 0; i + sizeof magic <= got; ++i) {
      if (std::memcmp(scan.data() + i, magic, sizeof magic) != 0) continue;
      uint64_t candidate = pos + i;
      try {
        FrameExtent frame = measure_frame(in, candidate);
        if (!frame.complete) continue;
        decode_frame(in, candidate, frame.bytes, dctx, nullptr, in_block, out_block);
      } catch (const TraceError&) {
        continue;  // compressed bytes that happen to look like a frame start
      }
      corrupt("its block headers run past the complete chunk at byte " + std::to_string(candidate), offset);
    }
    pos += got - (sizeof magic - 1);  // overlap: a magic split across two reads is still found
  }
}

// Hands every record on as a proto::Record, events rebuilt as messages.
class CallbackSink {
 public:
  explicit CallbackSink(const RecordCallback& on_record) : on_record_(on_record) {}
  void on_event(const EventFields& event) {
    *event_record_.mutable_event() = to_proto_event(event);
    on_record_(event_record_);
  }
  void on_record(const proto::Record& record) { on_record_(record); }

 private:
  const RecordCallback& on_record_;
  proto::Record event_record_;
};

}  // namespace

namespace trace_reader_detail {

void RecordSplitterBase::begin_chunk(uint64_t chunk_offset) {
  chunk_offset_ = chunk_offset;
  index_ = 0;
  length_ = 0;
  shift_ = 0;
  in_body_ = false;
}

void RecordSplitterBase::end_chunk() {
  if (in_body_) fail("record " + std::to_string(index_) + " of a chunk runs past the chunk's end");
  if (shift_ != 0) fail("bad record length in chunk (record " + std::to_string(index_) + ")");
  records_ += index_;
}

void RecordSplitterBase::fail(const std::string& what) const { throw TraceError(what, chunk_offset_); }

void RecordSplitterBase::fail_derived(const std::string& error) const {
  fail("record " + std::to_string(index_) + " of a chunk: " + error);
}

void RecordSplitterBase::read_length_byte(unsigned char byte) {
  length_ |= uint64_t(byte & 0x7f) << shift_;
  shift_ += 7;
  if (byte & 0x80) {
    // Five varint bytes already hold 2^35, far above kMaxRecordBytes.
    if (shift_ >= 35) fail("bad record length in chunk (record " + std::to_string(index_) + ")");
    return;
  }
  if (length_ == 0) fail("record " + std::to_string(index_) + " of a chunk is empty");
  if (length_ > kMaxRecordBytes)
    fail("record " + std::to_string(index_) + " of a chunk says it has " + std::to_string(length_) +
         " bytes (a record has at most " + mib(kMaxRecordBytes) + ")");
  in_body_ = true;
  shift_ = 0;
}

bool RecordSplitterBase::parse_generic(const char* data, size_t length) {
  bool parsed = false;
  {
#ifdef MEMTRACE_HAVE_LOG_SILENCER
    google::protobuf::LogSilencer quiet;
#endif
    parsed = record_.ParseFromArray(data, int(length));
  }
  if (!parsed) {
    scratch_.assign(data, length);
    if (repair_record_strings(scratch_.data(), scratch_.size()) == 0 || !record_.ParseFromString(scratch_))
      fail("record " + std::to_string(index_) + " of a chunk does not parse");
    ++records_with_invalid_text_;
  }
  if (!record_.has_event()) return false;
  event_ = carry_sticky_ ? EventFields(record_.event(), event_) : EventFields(record_.event());
  return true;
}

TraceReadSummary read_chunks(const std::string& path, ChunkSink& chunks) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw TraceError(std::string("cannot open: ") + std::strerror(errno), TraceError::kWholeFile);
  std::unique_ptr<int, FdCloser> closer(new int(fd));
  struct stat st;
  if (::fstat(fd, &st) != 0)
    throw TraceError(std::string("cannot stat: ") + std::strerror(errno), TraceError::kWholeFile);
  if (S_ISDIR(st.st_mode)) throw TraceError("is a directory, not a memtrace trace", TraceError::kWholeFile);
  // The analysis reads a trace twice and measures each chunk before decoding it: it needs a file.
  if (!S_ISREG(st.st_mode))
    throw TraceError("not a regular file (a pipe or device cannot be read as a trace)", TraceError::kWholeFile);
  Input in(fd, uint64_t(st.st_size));

  TraceReadSummary summary;
  uint64_t offset = 0;  // file offset of the next frame
  summary.format_version = read_header(in, &offset);
  summary.complete_bytes = offset;
  summary.file_bytes = in.size();

  std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) throw std::bad_alloc();
  ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, kMaxWindowLog);
  ByteBuffer in_block, out_block;
  chunks.begin_trace(summary.format_version);

  while (offset < in.size()) {
    FrameExtent frame = measure_frame(in, offset);
    if (in_block.empty()) {
      in_block.resize_discarding(kReadBlockBytes);
      out_block.resize_discarding(ZSTD_DStreamOutSize());
    }
    if (!frame.complete) {  // the writer was cut off inside this chunk
      if (!frame.skippable) {
        check_cut_frame(in, offset, dctx.get(), in_block, out_block);
        check_no_later_chunk(in, offset, dctx.get(), in_block, out_block);
      }
      break;
    }
    if (!frame.skippable) {
      decode_frame(in, offset, frame.bytes, dctx.get(), &chunks, in_block, out_block);
      ++summary.chunks;
    }
    offset += frame.bytes;
    summary.complete_bytes = offset;
  }
  summary.truncated = summary.complete_bytes != summary.file_bytes;
  return summary;
}

}  // namespace trace_reader_detail

TraceReadSummary read_trace(const std::string& path, const RecordCallback& on_record) {
  CallbackSink sink(on_record);
  return read_trace(path, sink);
}

}  // namespace memtrace
