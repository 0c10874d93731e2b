// The chunked zstd stream: records come back in file order across chunks, a cut-off last chunk is
// "truncated" (everything before it kept), and damaged files are clean TraceErrors with the byte offset.
#include <gtest/gtest.h>

#include "read/trace_reader.h"
#include "trace_builder.h"

#include <zstd.h>

#include <filesystem>

namespace memtrace {
namespace {

using test::TraceBuilder;

// Three chunks: [start, alloc A, alloc B] [free A, alloc C, alloc D] [free B, free C] = 3 + 3 + 2 records.
TraceBuilder three_chunks() {
  TraceBuilder b;
  b.start().event(test::driver_alloc(0, 0xA000, 100)).event(test::driver_alloc(0, 0xB000, 200)).end_chunk();
  b.event(test::driver_free(0, 0xA000))
      .event(test::driver_alloc(0, 0xC000, 300))
      .event(test::driver_alloc(0, 0xD000, 400))
      .end_chunk();
  b.event(test::driver_free(0, 0xB000)).event(test::driver_free(0, 0xC000)).end_chunk();
  return b;
}

struct ReadResult {
  TraceReadSummary summary;
  std::vector<uint64_t> sizes;  // Event.size of every event, in order
  uint64_t records = 0;
};

ReadResult read_bytes(const std::string& name, const std::string& bytes) {
  std::string path = test::temp_path(name);
  test::write_file(path, bytes);
  ReadResult result;
  result.summary = read_trace(path, [&](const proto::Record& r) {
    ++result.records;
    if (r.has_event()) result.sizes.push_back(r.event().size());
  });
  return result;
}

TraceError read_error(const std::string& name, const std::string& bytes) {
  try {
    read_bytes(name, bytes);
  } catch (const TraceError& e) {
    return e;
  }
  ADD_FAILURE() << name << ": expected a TraceError";
  return TraceError("", 0);
}

TEST(TraceReader, ReadsEveryRecordInFileOrder) {
  TraceBuilder b = three_chunks();
  ReadResult r = read_bytes("complete.mtrace", b.bytes());
  EXPECT_EQ(r.records, 8u);
  EXPECT_EQ(r.summary.records, 8u);
  EXPECT_EQ(r.summary.chunks, 3u);
  EXPECT_EQ(r.summary.format_version, 1u);
  EXPECT_FALSE(r.summary.truncated);
  EXPECT_EQ(r.summary.complete_bytes, b.bytes().size());
  EXPECT_EQ(r.sizes, (std::vector<uint64_t>{100, 200, 0, 300, 400, 0, 0}));
}

TEST(TraceReader, HeaderOnlyIsAnEmptyCompleteTrace) {
  ReadResult r = read_bytes("header-only.mtrace", test::header_frame());
  EXPECT_EQ(r.records, 0u);
  EXPECT_FALSE(r.summary.truncated);
}

TEST(TraceReader, CutInsideLastChunkKeepsEarlierChunksAndIsTruncated) {
  TraceBuilder b = three_chunks();
  size_t last = b.chunk_offsets()[2];
  size_t last_bytes = b.bytes().size() - last;
  // Cuts: one byte into the last chunk, its middle, and one byte short of its end.
  for (size_t cut : {last + 1, last + last_bytes / 2, b.bytes().size() - 1}) {
    SCOPED_TRACE("cut at byte " + std::to_string(cut));
    ReadResult r = read_bytes("cut.mtrace", b.bytes().substr(0, cut));
    EXPECT_TRUE(r.summary.truncated);
    EXPECT_EQ(r.records, 6u);  // chunks 0 and 1: 3 + 3
    EXPECT_EQ(r.sizes, (std::vector<uint64_t>{100, 200, 0, 300, 400}));
    EXPECT_EQ(r.summary.complete_bytes, last);
    EXPECT_EQ(r.summary.file_bytes, cut);
  }
}

TEST(TraceReader, CutInsideMiddleChunkKeepsOnlyTheFirst) {
  TraceBuilder b = three_chunks();
  ReadResult r = read_bytes("cut-middle.mtrace", b.bytes().substr(0, b.chunk_offsets()[1] + 5));
  EXPECT_TRUE(r.summary.truncated);
  EXPECT_EQ(r.records, 3u);
  EXPECT_EQ(r.summary.complete_bytes, b.chunk_offsets()[1]);
}

TEST(TraceReader, CutAtAChunkBoundaryIsComplete) {
  TraceBuilder b = three_chunks();
  ReadResult r = read_bytes("cut-boundary.mtrace", b.bytes().substr(0, b.chunk_offsets()[2]));
  EXPECT_FALSE(r.summary.truncated);
  EXPECT_EQ(r.records, 6u);
}

TEST(TraceReader, EmptyFileIsAnError) {
  TraceError e = read_error("empty.mtrace", "");
  EXPECT_STREQ(e.what(), "empty file, not a memtrace trace");
  EXPECT_FALSE(e.has_byte_offset());  // the file as such: no byte to point at
}

TEST(TraceReader, BadMagicIsNotATrace) {
  TraceError e = read_error("bad-magic.mtrace", test::header_frame(1, 0x184D2A51) + "rest");
  EXPECT_STREQ(e.what(), "not a memtrace trace: no memtrace header frame");
  EXPECT_EQ(e.byte_offset(), 0u);
  TraceError text = read_error("text.mtrace", "hello, this is a text file\n");
  EXPECT_STREQ(text.what(), "not a memtrace trace: no memtrace header frame");
}

TEST(TraceReader, WrongTagIsNotATrace) {
  std::string bytes = test::header_frame();
  bytes[8] = 'X';  // "XEMTRACE"
  TraceError e = read_error("bad-tag.mtrace", bytes);
  EXPECT_STREQ(e.what(), "not a memtrace trace: header tag is not \"MEMTRACE\"");
  EXPECT_EQ(e.byte_offset(), 8u);
}

TEST(TraceReader, UnknownVersionIsAnError) {
  TraceError e = read_error("version4.mtrace", test::header_frame(4));
  EXPECT_STREQ(e.what(), "unsupported trace format version 4 (this memtrace reads versions 1 to 3)");
  TraceError zero = read_error("version0.mtrace", test::header_frame(0));
  EXPECT_STREQ(zero.what(), "unsupported trace format version 0 (this memtrace reads versions 1 to 3)");
  EXPECT_EQ(e.byte_offset(), 16u);  // 8 bytes of frame header + 8 of "MEMTRACE"
}

TEST(TraceReader, CutInsideTheHeaderIsAnError) {
  TraceError e = read_error("short-header.mtrace", test::header_frame().substr(0, 20));
  EXPECT_STREQ(e.what(), "truncated header frame");
  EXPECT_EQ(e.byte_offset(), 20u);
}

TEST(TraceReader, LongerHeaderPayloadIsSkipped) {
  // A header whose payload is 16 + 4 bytes: the 4 extra bytes are skipped, then the chunks follow.
  TraceBuilder b = three_chunks();
  std::string bytes = b.bytes();
  bytes[4] = 20;
  bytes.insert(24, "more");
  ReadResult r = read_bytes("long-header.mtrace", bytes);
  EXPECT_EQ(r.records, 8u);
  EXPECT_FALSE(r.summary.truncated);
  // The same header in a file that ends inside the extra bytes.
  bytes[4] = char(0xff);
  bytes[5] = char(0xff);  // payload size 0xffff = 65,535 bytes: more than the whole file
  TraceError e = read_error("long-header-cut.mtrace", bytes);
  EXPECT_STREQ(e.what(), "truncated header frame");
  EXPECT_EQ(e.byte_offset(), bytes.size());  // where the file ends, 8 + 65,535 bytes being needed
}

TEST(TraceReader, ChecksumMismatchInMiddleChunkIsAnErrorAtThatChunk) {
  TraceBuilder b = three_chunks();
  std::string bytes = b.bytes();
  // The last 4 bytes of a frame are its content checksum: flipping one can only fail the checksum.
  size_t checksum_byte = b.chunk_offsets()[2] - 1;
  bytes[checksum_byte] = char(bytes[checksum_byte] ^ 0x01);
  TraceError e = read_error("bad-checksum.mtrace", bytes);
  EXPECT_EQ(std::string(e.what()).rfind("corrupt chunk: ", 0), 0u) << e.what();
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[1]);
}

TEST(TraceReader, GarbageInPlaceOfMiddleChunkIsAnError) {
  TraceBuilder b = three_chunks();
  std::string bytes =
      b.bytes().substr(0, b.chunk_offsets()[1]) + "garbage, not zstd" + b.bytes().substr(b.chunk_offsets()[2]);
  TraceError e = read_error("garbage.mtrace", bytes);
  EXPECT_EQ(std::string(e.what()).rfind("corrupt chunk: ", 0), 0u) << e.what();
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[1]);
}

TEST(TraceReader, RecordThatDoesNotParseIsAnError) {
  TraceBuilder b;
  b.start().end_chunk();
  // Length 1, then tag byte 0x0f: field 1 with wire type 7, which does not exist.
  b.event(test::driver_alloc(0, 0xA000, 100)).raw(std::string("\x01\x0f", 2)).end_chunk();
  TraceError e = read_error("bad-record.mtrace", b.bytes());
  EXPECT_STREQ(e.what(), "record 1 of a chunk does not parse");
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[1]);
}

TEST(TraceReader, RecordLengthPastChunkEndIsAnError) {
  TraceBuilder b;
  b.start().raw(std::string("\x64\x08\x01", 3)).end_chunk();  // says 100 bytes, 2 follow
  TraceError e = read_error("long-record.mtrace", b.bytes());
  EXPECT_STREQ(e.what(), "record 1 of a chunk runs past the chunk's end");
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[0]);
}

TEST(TraceReader, EmptyRecordIsAnError) {
  TraceBuilder b;
  b.start().raw(std::string("\x00", 1)).end_chunk();  // length 0: the writer never writes an empty Record
  TraceError e = read_error("empty-record.mtrace", b.bytes());
  EXPECT_STREQ(e.what(), "record 1 of a chunk is empty");
  EXPECT_EQ(e.byte_offset(), 24u);
}

TEST(TraceReader, OversizedRecordLengthIsRefusedBeforeAnythingIsAllocated) {
  // 16 MiB + 1 = 16,777,217 bytes announced, 3 present.
  TraceBuilder b;
  b.start().raw(test::varint(kMaxRecordBytes + 1) + "abc").end_chunk();
  TraceError e = read_error("huge-record.mtrace", b.bytes());
  EXPECT_STREQ(e.what(), "record 1 of a chunk says it has 16777217 bytes (a record has at most 16 MiB)");
  // Six length bytes (more than the five any bounded length needs).
  TraceBuilder six;
  six.start().raw(std::string("\xff\xff\xff\xff\xff\x01", 6)).end_chunk();
  e = read_error("long-varint.mtrace", six.bytes());
  EXPECT_STREQ(e.what(), "bad record length in chunk (record 1)");
}

// A chunk header by hand: zstd magic, then the given frame descriptor and the bytes that follow it.
std::string frame_with_header(const std::string& after_magic) {
  return std::string("\x28\xb5\x2f\xfd", 4) + after_magic;
}

TEST(TraceReader, FrameDeclaringAbsurdContentIsRefused) {
  // Descriptor 0xC4: 8-byte content size, checksum. Window descriptor 0x58: 2^(10 + 11) = 2 MiB.
  // Content size 2^33 = 8 GiB, then one empty last raw block (0x01 0x00 0x00) and a checksum.
  std::string size(8, '\0');
  size[4] = 2;  // 2^33 little-endian
  std::string frame = frame_with_header(std::string("\xc4\x58", 2) + size +
                                        std::string("\x01\x00\x00"
                                                    "abcd",
                                                    7));
  TraceError e = read_error("absurd-content.mtrace", test::header_frame() + frame);
  EXPECT_STREQ(e.what(), "corrupt chunk: frame declares 8589934592 bytes of content (a chunk has at most 4096 MiB)");
  EXPECT_EQ(e.byte_offset(), 24u);
}

TEST(TraceReader, FrameAskingForAHugeWindowIsRefused) {
  // Descriptor 0x04: no content size, not single-segment, checksum. Window descriptor 0xA0: exponent
  // 20, 2^(10 + 20) = 1 GiB of window that zstd would allocate.
  std::string frame =
      frame_with_header(std::string("\x04\xa0\x01\x00\x00"
                                    "abcd",
                                    9));
  TraceError e = read_error("huge-window.mtrace", test::header_frame() + frame);
  EXPECT_STREQ(e.what(), "corrupt chunk: frame asks for a window of 2^30 bytes (at most 2^24 are allowed)");
}

TEST(TraceReader, FrameWithoutChecksumIsRefused) {
  std::string content = test::varint(2) + std::string("\x42\x00", 2);  // one Record{end: {}}
  std::string frame(ZSTD_compressBound(content.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), content.data(), content.size(), 3));  // checksum off
  TraceError e = read_error("no-checksum.mtrace", test::header_frame() + frame);
  EXPECT_STREQ(e.what(), "corrupt chunk: frame has no content checksum");
}

TEST(TraceReader, ChunkLargerThanOneDecompressionStepKeepsRecordsWhole) {
  // 20,000 events (about 14 bytes each) and one 300,000-byte file name: 580 KB of records, more than
  // zstd's 128 KiB output step, so records straddle steps, the long one several of them.
  TraceBuilder b;
  b.start();
  for (uint64_t i = 0; i < 20000; ++i) b.event(test::driver_alloc(0, 0x1000 + i * 16, i + 1));
  b.python_frame(1, std::string(300000, 'f'), "long", 1).end_chunk();
  uint64_t events = 0, size_sum = 0;
  size_t name_bytes = 0;
  std::string path = test::temp_path("big-chunk.mtrace");
  test::write_file(path, b.bytes());
  TraceReadSummary s = read_trace(path, [&](const proto::Record& r) {
    if (r.has_event()) {
      ++events;
      size_sum += r.event().size();
    }
    if (r.has_python_frame()) name_bytes = r.python_frame().file().size();
  });
  EXPECT_EQ(s.records, 20002u);  // start + 20,000 events + the frame
  EXPECT_EQ(events, 20000u);
  EXPECT_EQ(size_sum, 200010000u);  // 1 + 2 + ... + 20,000 = 20,000 * 20,001 / 2
  EXPECT_EQ(name_bytes, 300000u);
  EXPECT_FALSE(s.truncated);
}

// A zstd frame of `content` whose header does not give the content size, so that the reader streams it
// through zstd's 128 KiB output steps instead of decoding it whole (trace_reader.cc): the records then
// straddle the pieces the record splitter is fed.
std::string compress_frame_without_size(const std::string& content) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string out(ZSTD_compressBound(content.size()) + 64, '\0');
  ZSTD_outBuffer zout{out.data(), out.size(), 0};
  ZSTD_inBuffer zin{content.data(), content.size(), 0};
  // All input with e_continue first: a frame ended in the first call would declare its size.
  size_t left = ZSTD_compressStream2(cctx, &zout, &zin, ZSTD_e_continue);
  ZSTD_inBuffer none{nullptr, 0, 0};
  while (!ZSTD_isError(left) && (left = ZSTD_compressStream2(cctx, &zout, &none, ZSTD_e_end)) != 0) {
  }
  ZSTD_freeCCtx(cctx);
  EXPECT_FALSE(ZSTD_isError(left));
  out.resize(zout.pos);
  return out;
}

// What a TraceSink saw.
struct CountingSink {
  uint64_t events = 0, size_sum = 0, address_sum = 0, stacks = 0, other_records = 0, stack_frames = 0;
  void on_event(const EventFields& e) {
    ++events;
    size_sum += e.size();
    address_sum += e.address();
  }
  void on_record(const proto::Record& r) {
    if (r.has_stack()) {
      ++stacks;
      stack_frames += uint64_t(r.stack().frames_size());
    } else {
      ++other_records;
    }
  }
};

TEST(TraceReader, SinkGetsTheSameRecordsWhetherAChunkIsDecodedWholeOrInPieces) {
  // 30,000 events of size i and address 0x1000 * i (i = 1 .. 30,000), after every 100th of them a stack
  // of 40 frames (a record of more than 128 bytes: a two-byte length, split by the general steps), and
  // the start record: about 700 KB of records, more than five 128 KiB output steps.
  TraceBuilder content;
  content.start();
  for (uint64_t i = 1; i <= 30000; ++i) {
    content.event(test::driver_alloc(0, 0x1000 * i, i));
    if (i % 100 == 0) content.stack(i, std::vector<uint64_t>(40, 0x7f0000000000 + i));
  }
  TraceBuilder whole = content;
  whole.end_chunk();
  // The same records, streamed: the bytes of the trace up to the first chunk, then the unsized frame.
  std::string header = whole.bytes().substr(0, whole.chunk_offsets()[0]);
  const std::string compressed = whole.bytes().substr(whole.chunk_offsets()[0]);
  std::string decompressed(ZSTD_getFrameContentSize(compressed.data(), compressed.size()), '\0');
  ASSERT_EQ(ZSTD_decompress(decompressed.data(), decompressed.size(), compressed.data(), compressed.size()),
            decompressed.size());
  std::string streamed_frame = compress_frame_without_size(decompressed);
  ASSERT_EQ(ZSTD_getFrameContentSize(streamed_frame.data(), streamed_frame.size()), ZSTD_CONTENTSIZE_UNKNOWN);

  for (const std::string& bytes : {whole.bytes(), header + streamed_frame}) {
    std::string path = test::temp_path("sink-pieces.mtrace");
    test::write_file(path, bytes);
    CountingSink sink;
    TraceReadSummary s = read_trace(path, sink);
    EXPECT_EQ(sink.events, 30000u);
    EXPECT_EQ(sink.size_sum, 450015000u);         // 30,000 * 30,001 / 2
    EXPECT_EQ(sink.address_sum, 1843261440000u);  // 0x1000 = 4096 times that: 4096 * 450,015,000
    EXPECT_EQ(sink.stacks, 300u);                 // one per 100 events
    EXPECT_EQ(sink.stack_frames, 12000u);         // 300 * 40
    EXPECT_EQ(sink.other_records, 1u);            // the start
    EXPECT_EQ(s.records, 30301u);
    EXPECT_EQ(s.chunks, 1u);
    EXPECT_FALSE(s.truncated);
  }
}

// What a machine that stops leaves: the file's size was extended, its data never written.
const char kZerosWhy[] =
    " bytes of zeros (the file's size was extended but its data never written, as when the machine stops)";

TEST(TraceReader, ZerosAfterTheLastChunkReadAsACut) {
  TraceBuilder b = three_chunks();
  for (size_t zeros : {4096u, 10u, 1u}) {
    SCOPED_TRACE(std::to_string(zeros) + " zeros");
    ReadResult r = read_bytes("zero-tail.mtrace", b.bytes() + std::string(zeros, '\0'));
    EXPECT_EQ(r.records, 8u);  // every record of the 3 chunks
    EXPECT_EQ(r.summary.chunks, 3u);
    EXPECT_EQ(r.sizes, (std::vector<uint64_t>{100, 200, 0, 300, 400, 0, 0}));
    EXPECT_TRUE(r.summary.truncated);
    EXPECT_EQ(r.summary.complete_bytes, b.bytes().size());
    EXPECT_EQ(r.summary.file_bytes, b.bytes().size() + zeros);
    EXPECT_EQ(r.summary.tail, std::to_string(zeros) + kZerosWhy);
  }
}

TEST(TraceReader, GarbageAfterTheLastChunkReadsAsACut) {
  TraceBuilder b = three_chunks();
  for (std::string garbage : {std::string("garbage, not zstd"), std::string("ab"), std::string(100, '\0') + "x"}) {
    SCOPED_TRACE(garbage);
    ReadResult r = read_bytes("garbage-tail.mtrace", b.bytes() + garbage);
    EXPECT_EQ(r.records, 8u);
    EXPECT_TRUE(r.summary.truncated);
    EXPECT_EQ(r.summary.complete_bytes, b.bytes().size());
    EXPECT_EQ(r.summary.tail,
              std::to_string(garbage.size()) + " bytes that are not a chunk (no zstd frame starts there)");
  }
}

// A tail made of frame-like bytes that overlap: every 9 bytes a zstd magic, a frame header and a raw block
// header whose 6 bytes hold the next unit's magic and frame header, so that the block headers measured from
// each magic run through every later unit. Measuring each candidate to the end would be quadratic in the tail
// (2 * 10^10 block headers for these 200,000 units); the scan's budget refuses the file instead.
TEST(TraceReader, ATailOfOverlappingFrameLikeBytesIsRefusedNotScannedForever) {
  TraceBuilder b = three_chunks();
  const std::string unit = {'\x28', '\xB5', '\x2F', '\xFD', '\x04', '\x00', '\x30', '\x00', '\x00'};
  std::string tail = "x";  // not a frame: the reader looks for a later chunk
  for (int i = 0; i < 200000; ++i) tail += unit;
  TraceError e = read_error("frame-like-tail.mtrace", b.bytes() + tail);
  EXPECT_STREQ(e.what(), "corrupt chunk: the bytes after it hold too many frame-like bytes to tell a cut from damage");
  EXPECT_EQ(e.byte_offset(), b.bytes().size());
}

TEST(TraceReader, ChunkCutOffThenZerosReadsAsACut) {
  // The last chunk's first 4 bytes (its magic: the zeros then say "no checksum", which a frame must
  // have), its first half (a block cut off inside: the zeros are not compressed data), then zeros.
  TraceBuilder b = three_chunks();
  size_t last = b.chunk_offsets()[2];
  size_t half = (b.bytes().size() - last) / 2;
  ASSERT_NE(b.bytes()[last + half - 1], '\0');  // else the zeros would begin before the cut
  for (size_t kept : {size_t(4), half}) {
    SCOPED_TRACE(std::to_string(kept) + " bytes of the last chunk");
    ReadResult r = read_bytes("cut-zeros.mtrace", b.bytes().substr(0, last + kept) + std::string(4096, '\0'));
    EXPECT_EQ(r.records, 6u);
    EXPECT_TRUE(r.summary.truncated);
    EXPECT_EQ(r.summary.complete_bytes, last);
    EXPECT_EQ(r.summary.tail, "a chunk cut off after " + std::to_string(kept) + " bytes, then 4096" + kZerosWhy);
  }
  // Cut without zeros: said as such.
  ReadResult r = read_bytes("cut-plain.mtrace", b.bytes().substr(0, last + half));
  EXPECT_EQ(r.summary.tail, "a chunk cut off after " + std::to_string(half) + " bytes");
}

TEST(TraceReader, DamageBeforeAZeroTailIsStillAnError) {
  // A checksum byte of the middle chunk flipped, and zeros after the last one: the damage is reported.
  TraceBuilder b = three_chunks();
  std::string bytes = b.bytes() + std::string(4096, '\0');
  bytes[b.chunk_offsets()[2] - 1] = char(bytes[b.chunk_offsets()[2] - 1] ^ 0x01);
  TraceError e = read_error("damage-zeros.mtrace", bytes);
  EXPECT_STREQ(e.what(), "corrupt chunk: Restored data doesn't match checksum");
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[1]);
  // A complete last chunk whose checksum is wrong, then zeros: damage, not a cut.
  bytes = b.bytes();
  bytes.back() = char(bytes.back() ^ 0x01);
  e = read_error("damage-last-zeros.mtrace", bytes + std::string(4096, '\0'));
  EXPECT_STREQ(e.what(), "corrupt chunk: Restored data doesn't match checksum");
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[2]);
}

TEST(TraceReader, ZerosInPlaceOfAMiddleChunkAreAnError) {
  // The middle chunk's bytes zeroed, the last chunk intact after them: damage, not a cut.
  TraceBuilder b = three_chunks();
  std::string bytes = b.bytes();
  std::fill(bytes.begin() + long(b.chunk_offsets()[1]), bytes.begin() + long(b.chunk_offsets()[2]), '\0');
  TraceError e = read_error("zeroed-middle.mtrace", bytes);
  EXPECT_EQ(std::string(e.what()), "corrupt chunk: not a zstd frame (a complete chunk follows at byte " +
                                       std::to_string(b.chunk_offsets()[2]) + ")");
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[1]);
}

TEST(TraceReader, SkippableFrameRunningPastLaterChunksIsAnError) {
  // A skippable frame (not a header) whose size sends it past the last chunk: read as a cut, the chunk
  // after it would be dropped. At the end of the file, the same frame is a cut.
  TraceBuilder b = three_chunks();
  std::string skippable("\x5e\x2a\x4d\x18\xff\xff\x00\x00", 8);  // magic 0x184D2A5E, 65,535 bytes of payload
  size_t at = b.chunk_offsets()[2];
  TraceError e = read_error("long-skippable.mtrace", b.bytes().substr(0, at) + skippable + b.bytes().substr(at));
  EXPECT_EQ(std::string(e.what()),
            "corrupt chunk: its size runs past the complete chunk at byte " + std::to_string(at + 8));
  EXPECT_EQ(e.byte_offset(), at);
  ReadResult r = read_bytes("skippable-tail.mtrace", b.bytes() + skippable);
  EXPECT_EQ(r.records, 8u);
  EXPECT_EQ(r.summary.tail, "a skippable frame cut off after 8 bytes");
}

TEST(TraceReader, TwoTracesJoinedAreRefusedAtTheSecond) {
  TraceBuilder b = three_chunks();
  std::string first = b.bytes();
  TraceError e = read_error("joined.mtrace", first + first);
  EXPECT_EQ(std::string(e.what()), "a second trace begins at byte " + std::to_string(first.size()) +
                                       " (two traces joined, e.g. with cat); split the file there");
  EXPECT_EQ(e.byte_offset(), first.size());
  EXPECT_TRUE(e.offset_in_what());
  // The first one cut off inside its last chunk: the second header is still what is reported.
  std::string cut = first.substr(0, b.chunk_offsets()[2] + 7);
  e = read_error("joined-cut.mtrace", cut + first);
  EXPECT_EQ(std::string(e.what()), "a second trace begins at byte " + std::to_string(cut.size()) +
                                       " (two traces joined, e.g. with cat); split the file there");
  // The second one cut off at its header's 16th byte: its tag is there.
  e = read_error("joined-short.mtrace", first + first.substr(0, 16));
  EXPECT_EQ(e.byte_offset(), first.size());
}

TEST(TraceReader, ASecondTraceStartRecordIsRefusedAtItsChunk) {
  // Chunks joined without the second header: its TraceStart begins a chunk.
  TraceBuilder b;
  b.start().event(test::driver_alloc(0, 0xA000, 100)).end_chunk();
  b.start().event(test::driver_alloc(0, 0xB000, 100)).end_chunk();
  TraceError e = read_error("two-starts.mtrace", b.bytes());
  EXPECT_EQ(std::string(e.what()), "a second trace begins at byte " + std::to_string(b.chunk_offsets()[1]) +
                                       " (two traces joined, e.g. with cat); split the file there");
  EXPECT_EQ(e.byte_offset(), b.chunk_offsets()[1]);
  // One inside a chunk, as its second record.
  TraceBuilder inside;
  inside.start().end_chunk();
  inside.event(test::driver_alloc(0, 0xA000, 100)).start().end_chunk();
  e = read_error("start-inside.mtrace", inside.bytes());
  EXPECT_STREQ(e.what(), "record 1 of a chunk is a second TraceStart (two traces in one file)");
  EXPECT_EQ(e.byte_offset(), inside.chunk_offsets()[1]);
  EXPECT_FALSE(e.offset_in_what());
}

TEST(TraceReader, EventsAfterTraceEndAreOneTrace) {
  // A program handler recovered from the signal that wrote the TraceEnd: its events follow, then a
  // second TraceEnd. One trace, read whole.
  TraceBuilder b;
  b.start().event(test::driver_alloc(0, 0xA000, 100)).end(1, 10, proto::TraceEnd::SIGNAL, 15).end_chunk();
  b.event(test::driver_alloc(0, 0xB000, 200)).end(2, 10).end_chunk();
  ReadResult r = read_bytes("recovered.mtrace", b.bytes());
  EXPECT_EQ(r.records, 5u);  // start, alloc, end, alloc, end
  EXPECT_EQ(r.sizes, (std::vector<uint64_t>{100, 200}));
  EXPECT_FALSE(r.summary.truncated);
}

TEST(TraceReader, DirectoryAndDeviceAreErrorsNotEmptyTraces) {
  try {
    read_trace(std::filesystem::temp_directory_path().string(), [](const proto::Record&) {});
    ADD_FAILURE() << "a directory was read";
  } catch (const TraceError& e) {
    EXPECT_STREQ(e.what(), "is a directory, not a memtrace trace");
  }
  try {
    read_trace("/dev/null", [](const proto::Record&) {});
    ADD_FAILURE() << "/dev/null was read";
  } catch (const TraceError& e) {
    EXPECT_STREQ(e.what(), "is a character device, not a regular file (a trace is read from a file, twice)");
    EXPECT_FALSE(e.has_byte_offset());
  }
}

TEST(TraceReader, MissingFileIsAnError) {
  EXPECT_THROW(read_trace(test::temp_path("does-not-exist.mtrace"), [](const proto::Record&) {}), TraceError);
}

}  // namespace
}  // namespace memtrace
