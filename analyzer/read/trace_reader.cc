#include "read/trace_reader.h"

#include "read/derived_fields.h"
#include "read/event_decoder.h"
#include "read/read_progress.h"
#include "read/utf8_repair.h"

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
#include <optional>
#include <vector>

namespace memtrace {
namespace {

constexpr size_t kReadBlockBytes = 1 << 20;
// Frame format facts from the zstd format specification (RFC 8878, section 3.1); the frame magics are in
// proto/trace_format.h.
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

// A frame magic as the 4 bytes the file holds (little-endian), for scanning bytes for it.
struct MagicBytes {
  unsigned char b[4];
};
constexpr MagicBytes magic_bytes(uint32_t magic) {
  return {{uint8_t(magic), uint8_t(magic >> 8), uint8_t(magic >> 16), uint8_t(magic >> 24)}};
}

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
  // The same file as if it ended at `size` (a frame read without the zeros that end the file).
  Input prefix(uint64_t size) const { return Input(fd_, std::min(size, size_)); }

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
  if (payload_bytes < kHeaderPayloadBytes) throw TraceError("not a memtrace trace: header frame too short", 4);
  if (got < kHeaderBytes) throw TraceError("truncated header frame", got);
  if (std::memcmp(header + kHeaderTagOffset, kHeaderTag, sizeof kHeaderTag) != 0)
    throw TraceError("not a memtrace trace: header tag is not \"MEMTRACE\"", kHeaderTagOffset);
  uint32_t version = load_le32(header + kHeaderVersionOffset);
  if (version < kOldestTraceFormatVersion || version > kTraceFormatVersion)
    throw TraceError("unsupported trace format version " + std::to_string(version) + " (this memtrace reads versions " +
                         std::to_string(kOldestTraceFormatVersion) + " to " + std::to_string(kTraceFormatVersion) + ")",
                     kHeaderVersionOffset);
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

// Whether the bytes at `offset` begin with a zstd or skippable frame magic, or with the beginning of
// one where the file ends within 4 bytes (a cut).
bool starts_like_a_frame(Input& in, uint64_t offset) {
  constexpr MagicBytes zstd_magic = magic_bytes(kZstdFrameMagic);
  constexpr MagicBytes skippable_magic = magic_bytes(kHeaderFrameMagic);  // the lowest skippable magic
  const unsigned char* zstd = zstd_magic.b;
  const unsigned char* skippable = skippable_magic.b;
  unsigned char head[4];
  size_t n = in.read_at(offset, head, sizeof head);
  if (n == 0) return false;
  bool zstd_prefix = std::memcmp(head, zstd, n) == 0;
  bool skippable_prefix = (head[0] & 0xF0) == skippable[0] && std::memcmp(head + 1, skippable + 1, n - 1) == 0;
  return zstd_prefix || skippable_prefix;
}

// The frame at `offset` must start like one (starts_like_a_frame). With `blocks_left`, each block header
// read takes one from it, and the frame is refused once none is left: the scan for a later chunk bounds
// its work with it (find_later_frame).
FrameExtent measure_frame(Input& in, uint64_t offset, uint64_t* blocks_left = nullptr) {
  unsigned char head[18];  // the longest frame header: magic 4, descriptor 1, window 1, dictionary 4, size 8
  size_t got = in.read_at(offset, head, sizeof head);
  if (got < 4) return FrameExtent{};  // the beginning of a magic, cut
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
    if (blocks_left) {
      if (*blocks_left == 0) corrupt("too many blocks", offset);
      --*blocks_left;
    }
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

// The decompression context and the blocks it reads from and writes to, reused from frame to frame.
// The blocks are allocated at the first frame (a file of only a header needs none).
class Decoder {
 public:
  Decoder() : dctx_(ZSTD_createDCtx()) {
    if (!dctx_) throw std::bad_alloc();
    ZSTD_DCtx_setParameter(dctx_.get(), ZSTD_d_windowLogMax, kMaxWindowLog);
  }
  ZSTD_DCtx* dctx() { return dctx_.get(); }
  ByteBuffer& in_block() { return ready().in_block_; }
  ByteBuffer& out_block() { return ready().out_block_; }

 private:
  Decoder& ready() {
    if (in_block_.empty()) {
      in_block_.resize_discarding(kReadBlockBytes);
      out_block_.resize_discarding(ZSTD_DStreamOutSize());
    }
    return *this;
  }
  std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx_;
  ByteBuffer in_block_, out_block_;
};

// Decompresses the complete frame [offset, offset + bytes) into `splitter` (or nowhere, to check the
// frame), checking its checksum.
void decode_frame(Input& in, uint64_t offset, uint64_t bytes, Decoder& decoder,
                  trace_reader_detail::ChunkSink* splitter) {
  ZSTD_DCtx* dctx = decoder.dctx();
  ByteBuffer& in_block = decoder.in_block();
  ByteBuffer& out_block = decoder.out_block();
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  if (splitter) splitter->begin_chunk(offset);
  make_room_for_whole_frame(in, offset, bytes, in_block, out_block);
  uint64_t decoded_bytes = 0;
  uint64_t fed = 0;  // frame bytes read into in_block so far
  ZSTD_inBuffer zin{in_block.data(), 0, 0};
  while (true) {
    if (zin.pos == zin.size && fed < bytes) {
      size_t want = size_t(std::min<uint64_t>(bytes - fed, in_block.size()));
      if (in.read_at(offset + fed, in_block.data(), want) != want)
        throw TraceError("file shrank while read", offset + fed);
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
void check_cut_frame(Input& in, uint64_t offset, Decoder& decoder) {
  ZSTD_DCtx* dctx = decoder.dctx();
  ByteBuffer& in_block = decoder.in_block();
  ByteBuffer& out_block = decoder.out_block();
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

[[noreturn]] void second_trace(uint64_t offset) {
  throw TraceError("a second trace begins at byte " + std::to_string(offset) +
                       " (two traces joined, e.g. with cat); split the file there",
                   offset, /*offset_in_what=*/true);
}

// Whether the bytes at `offset` are a trace's header frame ("MEMTRACE" after the skippable frame magic).
bool is_header_frame(Input& in, uint64_t offset) {
  unsigned char head[kHeaderTagOffset + sizeof kHeaderTag];
  return in.read_at(offset, head, sizeof head) == sizeof head && load_le32(head) == kHeaderFrameMagic &&
         std::memcmp(head + kHeaderTagOffset, kHeaderTag, sizeof kHeaderTag) == 0;
}

// A header frame or a complete, valid chunk found after a frame that is not one.
struct LaterFrame {
  enum Kind { kNone, kHeader, kChunk } kind = kNone;
  uint64_t offset = 0;
};

// What the scan for a later chunk may spend on candidates, the 4 bytes of a zstd frame magic found
// after the frame at `offset`: block headers read while measuring them, and complete ones decoded.
// Compressed data holds a stray magic once in 2^32 bytes, and a real chunk of kMaxChunkBytes has about
// 2^15 blocks, so no trace comes near these; a hostile tail of overlapping frame-like bytes would make
// the scan quadratic in its size without them. Past them the file is refused: a cut cannot be told
// from damage there.
constexpr uint64_t kMaxLaterBlockHeaders = 1 << 22;
constexpr uint64_t kMaxLaterChunksDecoded = 16;

[[noreturn]] void undecidable_tail(uint64_t offset) {
  corrupt("the bytes after it hold too many frame-like bytes to tell a cut from damage", offset);
}

// The first header frame after `offset`, or (when `chunks`) the first complete chunk that decodes
// without error, whichever comes first. Throws TraceError past the scan's budget (kMaxLaterBlockHeaders).
LaterFrame find_later_frame(Input& in, uint64_t offset, Decoder& decoder, bool chunks) {
  constexpr MagicBytes zstd_magic = magic_bytes(kZstdFrameMagic);
  constexpr MagicBytes header_magic = magic_bytes(kHeaderFrameMagic);
  const unsigned char(&zstd)[4] = zstd_magic.b;
  const unsigned char(&header)[4] = header_magic.b;
  std::vector<unsigned char> scan(64 << 10);
  uint64_t blocks_left = kMaxLaterBlockHeaders;
  uint64_t decodes_left = kMaxLaterChunksDecoded;
  for (uint64_t pos = offset + 1; pos + sizeof zstd <= in.size();) {
    size_t got = in.read_at(pos, scan.data(), scan.size());
    if (got < sizeof zstd) break;
    for (size_t i = 0; i + sizeof zstd <= got; ++i) {
      uint64_t candidate = pos + i;
      if (std::memcmp(scan.data() + i, header, sizeof header) == 0 && is_header_frame(in, candidate))
        return {LaterFrame::kHeader, candidate};
      if (!chunks || std::memcmp(scan.data() + i, zstd, sizeof zstd) != 0) continue;
      try {
        FrameExtent frame = measure_frame(in, candidate, &blocks_left);
        if (!frame.complete) continue;
        if (decodes_left == 0) undecidable_tail(offset);
        --decodes_left;
        decode_frame(in, candidate, frame.bytes, decoder, nullptr);
      } catch (const TraceError&) {
        if (blocks_left == 0 || decodes_left == 0) undecidable_tail(offset);
        continue;  // compressed bytes that happen to look like a frame start
      }
      return {LaterFrame::kChunk, candidate};
    }
    pos += got - (sizeof zstd - 1);  // overlap: a magic split across two reads is still found
  }
  return {};
}

// The frame at `offset` is where the trace's data ends, unless something follows it: a second trace's
// header (refused as such) or a complete chunk, whose offset is returned (the frame is damage, then:
// read as a cut, it would silently drop that chunk and those after it).
std::optional<uint64_t> later_chunk(Input& in, uint64_t offset, Decoder& decoder) {
  LaterFrame later = find_later_frame(in, offset, decoder, /*chunks=*/true);
  if (later.kind == LaterFrame::kHeader) second_trace(later.offset);
  if (later.kind == LaterFrame::kChunk) return later.offset;
  return std::nullopt;
}

// Where the run of zero bytes that ends the file begins, looking no further back than `floor`.
uint64_t zero_run_begin(Input& in, uint64_t floor) {
  uint64_t begin = in.size();
  std::vector<char> piece(64 << 10);
  while (begin > floor) {
    size_t n = size_t(std::min<uint64_t>(piece.size(), begin - floor));
    if (in.read_at(begin - n, piece.data(), n) != n) return in.size();  // the file shrank
    size_t nonzero = n;
    while (nonzero > 0 && piece[nonzero - 1] == 0) --nonzero;
    begin -= n - nonzero;
    if (nonzero > 0) break;
  }
  return begin;
}

// A machine that stops after a file's size was extended but before its data was written leaves zeros
// at its end (ext4, XFS). A run this long cannot end a chunk, which ends in a 4-byte checksum after
// compressed bytes that hold no such run, so it is read as such a tail, not as part of the chunk.
constexpr uint64_t kMinZeroTailBytes = 64;

// Where the file's zero tail begins (a run of at least kMinZeroTailBytes zeros that ends the file, not
// before `floor`), or the file's size where it has none.
uint64_t zero_tail_begin(Input& in, uint64_t floor) {
  uint64_t begin = zero_run_begin(in, floor);
  return in.size() - begin >= kMinZeroTailBytes ? begin : in.size();
}

std::string zeros_text(uint64_t bytes) {
  return std::to_string(bytes) +
         " bytes of zeros (the file's size was extended but its data never written, as when the machine stops)";
}

// Measures the frame at `offset`. A frame cut off where the zero tail begins is measured without the
// zeros (`*data_end` is then where they begin): one cut inside its header (a descriptor of 0 has no
// checksum), or inside its last block (the zeros complete it, checksum included).
FrameExtent measure_before_zero_tail(Input& in, uint64_t offset, uint64_t zero_begin, uint64_t* data_end) {
  FrameExtent frame;
  try {
    frame = measure_frame(in, offset);
  } catch (const TraceError&) {
    if (zero_begin == in.size()) throw;
    Input data = in.prefix(zero_begin);
    frame = measure_frame(data, offset);
    if (frame.complete) throw;
    *data_end = zero_begin;
    return frame;
  }
  // A valid chunk's checksum is 4 zero bytes once in 2^32 chunks: one whose checksum is in the zero tail
  // was cut off before it.
  if (frame.complete && !frame.skippable && zero_begin + kChecksumBytes <= offset + frame.bytes) {
    frame.complete = false;
    *data_end = zero_begin;
  }
  return frame;
}

// check_cut_frame, for a frame whose bytes end at `*data_end`, or where the file's zero tail begins (a
// cut inside a block whose bytes the zeros replace): `*data_end` is then where they begin.
void check_cut_before_zero_tail(Input& in, uint64_t offset, uint64_t zero_begin, Decoder& decoder, uint64_t* data_end) {
  if (*data_end == in.size()) {
    try {
      check_cut_frame(in, offset, decoder);
      return;
    } catch (const TraceError&) {
      if (zero_begin == in.size()) throw;
    }
    *data_end = zero_begin;
  }
  Input data = in.prefix(*data_end);
  check_cut_frame(data, offset, decoder);
}

// What TraceReadSummary::tail says of a frame cut off at the end of the file.
std::string describe_cut(Input& in, uint64_t offset, bool skippable, uint64_t zero_begin) {
  std::string what = std::string(skippable ? "a skippable frame" : "a chunk") + " cut off after " +
                     std::to_string(zero_begin - offset) + " bytes";
  if (zero_begin != in.size()) what += ", then " + zeros_text(in.size() - zero_begin);
  return what;
}

// Measures the frame at `offset`, or finds that the trace's data ends there: then returns nullopt and
// says in `*tail` what the rest of the file is. A cut is a frame that runs past the end of the file or
// into its zero tail (which begins at `zero_begin`, zero_tail_begin), or bytes that are not a frame
// (zeros, garbage), with no complete chunk after them. Throws TraceError for damage: a bad frame that a
// complete chunk follows, a frame that is not a valid prefix of one, a second trace's header frame.
std::optional<FrameExtent> next_frame(Input& in, uint64_t offset, uint64_t zero_begin, Decoder& decoder,
                                      std::string* tail) {
  // Only the bytes before the zero tail: a frame's magic cut off there starts a frame.
  Input data = in.prefix(std::max(zero_begin, offset + 1));
  if (!starts_like_a_frame(data, offset)) {
    if (auto chunk = later_chunk(in, offset, decoder))
      corrupt("not a zstd frame (a complete chunk follows at byte " + std::to_string(*chunk) + ")", offset);
    uint64_t bytes = in.size() - offset;
    *tail = zero_run_begin(in, offset) == offset
                ? zeros_text(bytes)
                : std::to_string(bytes) + " bytes that are not a chunk (no zstd frame starts there)";
    return std::nullopt;
  }
  uint64_t data_end = in.size();
  FrameExtent frame = measure_before_zero_tail(in, offset, zero_begin, &data_end);
  if (frame.skippable && is_header_frame(in, offset)) second_trace(offset);
  if (frame.complete) return frame;
  if (!frame.skippable) check_cut_before_zero_tail(in, offset, zero_begin, decoder, &data_end);
  if (auto chunk = later_chunk(in, offset, decoder))
    corrupt(std::string(frame.skippable ? "its size runs" : "its block headers run") +
                " past the complete chunk at byte " + std::to_string(*chunk),
            offset);
  *tail = describe_cut(in, offset, frame.skippable, std::max(zero_begin, offset));
  return std::nullopt;
}

// Opens `path` for reading, only if it is a regular file: the analysis reads a trace twice and measures
// each chunk before decoding it. Its type is checked before the open, as opening a FIFO waits for a
// writer (and a device may do anything), and again after it, on what was opened.
int open_trace_file(const std::string& path, struct stat* st) {
  auto require_regular = [](const struct stat& s) {
    if (S_ISREG(s.st_mode)) return;
    if (S_ISDIR(s.st_mode)) throw TraceError("is a directory, not a memtrace trace", TraceError::kWholeFile);
    const char* kind = S_ISFIFO(s.st_mode)   ? "a FIFO (named pipe)"
                       : S_ISCHR(s.st_mode)  ? "a character device"
                       : S_ISBLK(s.st_mode)  ? "a block device"
                       : S_ISSOCK(s.st_mode) ? "a socket"
                                             : "a special file";
    throw TraceError(std::string("is ") + kind + ", not a regular file (a trace is read from a file, twice)",
                     TraceError::kWholeFile);
  };
  if (::stat(path.c_str(), st) != 0)
    throw TraceError(std::string("cannot open: ") + std::strerror(errno), TraceError::kWholeFile);
  require_regular(*st);
  // O_NONBLOCK: a FIFO put at the path after the stat does not block the open either (fstat refuses it).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw TraceError(std::string("cannot open: ") + std::strerror(errno), TraceError::kWholeFile);
  int saved_errno = 0;
  if (::fstat(fd, st) != 0) saved_errno = errno;
  if (saved_errno == 0 && S_ISREG(st->st_mode)) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // reads of a regular file wait as usual
    return fd;
  }
  ::close(fd);
  if (saved_errno != 0)
    throw TraceError(std::string("cannot stat: ") + std::strerror(saved_errno), TraceError::kWholeFile);
  require_regular(*st);
  return -1;  // not reached: require_regular threw
}

// Tells the installed ReadProgress (read_progress.h), if any, that a read began, and that it ended when this
// goes out of scope, however the read ends.
class ProgressScope {
 public:
  ProgressScope(const std::string& path, uint64_t file_bytes) : progress_(read_progress()) {
    if (progress_) progress_->begin_read(path, file_bytes);
  }
  ~ProgressScope() {
    if (progress_) progress_->end_read();
  }
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;
  // Once per chunk: a test of a pointer when none is installed.
  void chunk_read(uint64_t complete_bytes) {
    if (progress_) progress_->chunk_read(complete_bytes);
  }

 private:
  ReadProgress* progress_;
};

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
  struct stat st;
  std::unique_ptr<int, FdCloser> closer(new int(open_trace_file(path, &st)));
  Input in(*closer, uint64_t(st.st_size));

  TraceReadSummary summary;
  uint64_t offset = 0;  // file offset of the next frame
  summary.format_version = read_header(in, &offset);
  summary.complete_bytes = offset;
  summary.file_bytes = in.size();

  ProgressScope progress(path, summary.file_bytes);
  Decoder decoder;
  const uint64_t zero_begin = zero_tail_begin(in, offset);
  chunks.begin_trace(summary.format_version);
  while (offset < in.size()) {
    std::optional<FrameExtent> frame;
    try {
      frame = next_frame(in, offset, zero_begin, decoder, &summary.tail);
      if (frame && !frame->skippable) decode_frame(in, offset, frame->bytes, decoder, &chunks);
    } catch (const TraceError& e) {
      // A damaged frame with a second trace after it: two traces joined (the first one cut off), which is
      // what to say.
      if (!e.offset_in_what()) {
        LaterFrame later = find_later_frame(in, offset, decoder, /*chunks=*/false);
        if (later.kind == LaterFrame::kHeader) second_trace(later.offset);
      }
      throw;
    }
    if (!frame) break;  // the trace's data ends here
    if (!frame->skippable) ++summary.chunks;
    offset += frame->bytes;
    summary.complete_bytes = offset;
    progress.chunk_read(offset);
  }
  summary.truncated = summary.complete_bytes != summary.file_bytes;
  return summary;
}

void RecordSplitterBase::note_start() {
  if (!seen_start_) {
    seen_start_ = true;
    return;
  }
  // A chunk that begins with a TraceStart begins the second trace; one further in was joined some other way.
  if (index_ == 0) second_trace(chunk_offset_);
  fail("record " + std::to_string(index_) + " of a chunk is a second TraceStart (two traces in one file)");
}

}  // namespace trace_reader_detail

TraceReadSummary read_trace(const std::string& path, const RecordCallback& on_record) {
  CallbackSink sink(on_record);
  return read_trace(path, sink);
}

}  // namespace memtrace
