// A real trace (examples/train_leak.mtrace, recorded on an H200) cut at many byte offsets and damaged
// at many others. The chunk boundaries and each chunk's records are found here independently of the
// reader (ZSTD_findFrameCompressedSize, one-shot decompression, protobuf's CodedInputStream), and the
// numbers of every readable prefix are checked against a replay of exactly those records.
#include <google/protobuf/io/coded_stream.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <fstream>
#include <sstream>

#include "analysis/analysis.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

struct Chunk {
  size_t begin = 0, end = 0;  // file offsets
  std::vector<proto::Record> records;
};

struct SplitTrace {
  size_t header_end = 0;
  std::vector<Chunk> chunks;
};

std::string decompress(const char* frame, size_t bytes) {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::string content;
  std::string piece(ZSTD_DStreamOutSize(), '\0');
  ZSTD_inBuffer in{frame, bytes, 0};
  size_t ret = 1;
  while (ret != 0) {
    ZSTD_outBuffer out{piece.data(), piece.size(), 0};
    ret = ZSTD_decompressStream(dctx, &out, &in);
    if (ZSTD_isError(ret)) break;
    content.append(piece.data(), out.pos);
  }
  ZSTD_freeDCtx(dctx);
  EXPECT_FALSE(ZSTD_isError(ret)) << ZSTD_getErrorName(ret);
  return content;
}

std::vector<proto::Record> parse_records(const std::string& content) {
  std::vector<proto::Record> records;
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(content.data()), int(content.size()));
  while (!input.ExpectAtEnd()) {
    uint32_t length = 0;
    EXPECT_TRUE(input.ReadVarint32(&length));
    auto limit = input.PushLimit(int(length));
    proto::Record record;
    EXPECT_TRUE(record.ParseFromCodedStream(&input));
    input.PopLimit(limit);
    records.push_back(std::move(record));
  }
  return records;
}

SplitTrace split(const std::string& bytes) {
  SplitTrace t;
  uint32_t payload = uint32_t(uint8_t(bytes[4])) | uint32_t(uint8_t(bytes[5])) << 8 |
                     uint32_t(uint8_t(bytes[6])) << 16 | uint32_t(uint8_t(bytes[7])) << 24;
  t.header_end = 8 + payload;
  for (size_t offset = t.header_end; offset < bytes.size();) {
    size_t frame_bytes = ZSTD_findFrameCompressedSize(bytes.data() + offset, bytes.size() - offset);
    if (ZSTD_isError(frame_bytes)) {
      ADD_FAILURE() << "frame at " << offset << ": " << ZSTD_getErrorName(frame_bytes);
      break;
    }
    t.chunks.push_back({offset, offset + frame_bytes, parse_records(decompress(bytes.data() + offset, frame_bytes))});
    offset += frame_bytes;
  }
  return t;
}

// The other route: the records of the first `n` chunks replayed straight into a MemoryModel.
MemoryModel replay_chunks(const SplitTrace& t, size_t n, uint64_t* events) {
  MemoryModel model;
  *events = 0;
  for (size_t i = 0; i < n; ++i)
    for (const proto::Record& r : t.chunks[i].records) {
      if (r.has_event()) {
        model.apply(r.event());
        ++*events;
      }
      if (r.has_end()) model.apply_end(r.end());
    }
  model.finish();
  return model;
}

void expect_same_numbers(const MemoryModel& expected, const Analysis& a) {
  const MemoryModel& got = a.model;
  EXPECT_EQ(got.health().events, expected.health().events);
  EXPECT_EQ(got.health().unknown_frees, expected.health().unknown_frees);
  EXPECT_EQ(got.health().double_frees, expected.health().double_frees);
  EXPECT_EQ(got.health().teardown_frees, expected.health().teardown_frees);
  EXPECT_EQ(got.now_ns(), expected.now_ns());
  ASSERT_EQ(got.devices().size(), expected.devices().size());
  for (const auto& [device, e] : expected.devices()) {
    const DeviceState& g = got.devices().at(device);
    EXPECT_EQ(g.totals(), e.totals()) << "device " << device;
    EXPECT_EQ(g.peak_allocated().bytes, e.peak_allocated().bytes);
    EXPECT_EQ(g.peak_allocated().event_index, e.peak_allocated().event_index);
    EXPECT_EQ(g.peak_allocated().time_ns, e.peak_allocated().time_ns);
    EXPECT_EQ(g.peak_reserved().bytes, e.peak_reserved().bytes);
    EXPECT_EQ(g.peak_driver.bytes, e.peak_driver.bytes);
    EXPECT_EQ(g.driver_allocations, e.driver_allocations);
    EXPECT_EQ(g.driver_frees, e.driver_frees);
    EXPECT_EQ(g.block_allocations, e.block_allocations);
    EXPECT_EQ(g.block_frees, e.block_frees);
  }
  ASSERT_EQ(got.live_at_exit().size(), expected.live_at_exit().size());
  for (size_t i = 0; i < got.live_at_exit().size(); ++i) {
    EXPECT_EQ(got.live_at_exit()[i].size_bytes, expected.live_at_exit()[i].size_bytes);
    EXPECT_EQ(got.live_at_exit()[i].event_index, expected.live_at_exit()[i].event_index);
  }
}

class CutRealTrace : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    bytes_ = new std::string(test::read_file(MEMTRACE_EXAMPLE_TRACE));
    trace_ = new SplitTrace(split(*bytes_));
  }
  static void TearDownTestSuite() {
    delete bytes_;
    delete trace_;
  }
  static std::string* bytes_;
  static SplitTrace* trace_;
};
std::string* CutRealTrace::bytes_ = nullptr;
SplitTrace* CutRealTrace::trace_ = nullptr;

TEST_F(CutRealTrace, TheExampleIsWhatThisTestExpects) {
  // The committed example: a 24-byte header and 21 chunks, 16,417 events in all, ending normally.
  ASSERT_EQ(trace_->header_end, 24u);
  ASSERT_EQ(trace_->chunks.size(), 21u);
  EXPECT_EQ(trace_->chunks.back().end, bytes_->size());
  uint64_t events = 0;
  replay_chunks(*trace_, trace_->chunks.size(), &events);
  EXPECT_EQ(events, 16417u);
  EXPECT_TRUE(trace_->chunks.back().records.back().has_end());
}

TEST_F(CutRealTrace, EveryCutReadsTheCompleteChunksBeforeIt) {
  std::vector<size_t> cuts;
  for (size_t cut = 0; cut <= trace_->header_end; ++cut) cuts.push_back(cut);  // every header byte
  for (size_t cut = trace_->header_end + 1; cut < bytes_->size(); cut += 509) cuts.push_back(cut);
  for (const Chunk& c : trace_->chunks)
    for (size_t cut : {c.begin + 1, c.end - 1, c.end}) cuts.push_back(cut);
  std::string path = test::temp_path("cut-real.mtrace");
  for (size_t cut : cuts) {
    SCOPED_TRACE("cut at byte " + std::to_string(cut));
    test::write_file(path, bytes_->substr(0, cut));
    if (cut < trace_->header_end) {  // only a cut inside the header is an error
      EXPECT_THROW(analyze_trace(path, false), TraceError);
      continue;
    }
    size_t complete = 0;  // chunks wholly before the cut
    while (complete < trace_->chunks.size() && trace_->chunks[complete].end <= cut) ++complete;
    size_t boundary = complete ? trace_->chunks[complete - 1].end : trace_->header_end;
    std::unique_ptr<Analysis> a;
    ASSERT_NO_THROW(a = analyze_trace(path, /*with_live_at_peak=*/cut % 2 == 0));
    EXPECT_EQ(a->read.truncated, cut != boundary);
    EXPECT_EQ(a->read.complete_bytes, boundary);
    EXPECT_EQ(a->read.chunks, complete);
    uint64_t events = 0;
    MemoryModel expected = replay_chunks(*trace_, complete, &events);
    EXPECT_EQ(a->model.health().events, events);
    expect_same_numbers(expected, *a);
    EXPECT_EQ(a->info.end.has_value(), complete == trace_->chunks.size());
  }
}

TEST_F(CutRealTrace, DamagedByteAnywhereInAChunkIsAnErrorAtThatChunk) {
  std::string path = test::temp_path("damaged-real.mtrace");
  for (const Chunk& c : trace_->chunks) {
    // The first bytes of the frame (magic, header), the first block header, its middle, the checksum.
    std::vector<size_t> positions = {c.begin, c.begin + 4, c.begin + 6, (c.begin + c.end) / 2, c.end - 1};
    for (size_t p = c.begin + 7; p < c.end; p += 509) positions.push_back(p);
    for (size_t p : positions) {
      SCOPED_TRACE("byte " + std::to_string(p) + " of the chunk at " + std::to_string(c.begin));
      std::string damaged = *bytes_;
      damaged[p] = char(damaged[p] ^ 0xff);
      test::write_file(path, damaged);
      if (p == c.begin && c.end == bytes_->size()) {
        // The last chunk's magic damaged: bytes that are not a frame, nothing after them, read as garbage
        // after the last complete chunk (a cut), which the report says.
        std::unique_ptr<Analysis> a = analyze_trace(path, false);
        EXPECT_TRUE(a->read.truncated);
        EXPECT_EQ(a->read.complete_bytes, c.begin);
        EXPECT_EQ(a->read.chunks, trace_->chunks.size() - 1);
        EXPECT_EQ(a->read.tail,
                  std::to_string(c.end - c.begin) + " bytes that are not a chunk (no zstd frame starts there)");
        continue;
      }
      try {
        analyze_trace(path, false);
        ADD_FAILURE() << "read without error";
      } catch (const TraceError& e) {
        EXPECT_EQ(e.byte_offset(), c.begin) << e.what();
      }
    }
  }
}

TEST_F(CutRealTrace, ACutFollowedByZerosReadsTheCompleteChunksBeforeIt) {
  // What a machine that stops while the tracer writes leaves: the file's size extended by the write, the
  // data of the last chunk partly or never written, zeros in its place. Cuts in the last three chunks,
  // then 4 KiB of zeros: every complete chunk is read, and the tail is said as it is.
  std::string path = test::temp_path("cut-zeros-real.mtrace");
  const std::string why =
      " bytes of zeros (the file's size was extended but its data never written, as when the machine stops)";
  size_t tried = 0;
  for (size_t i = trace_->chunks.size() - 3; i < trace_->chunks.size(); ++i) {
    const Chunk& c = trace_->chunks[i];
    std::vector<size_t> cuts = {c.begin, c.begin + 1, c.begin + 4, c.begin + 6, c.begin + 9, c.end - 5, c.end - 4};
    for (size_t cut = c.begin + 10; cut < c.end - 4; cut += 211) cuts.push_back(cut);
    for (size_t cut : cuts) {
      SCOPED_TRACE("cut at byte " + std::to_string(cut));
      test::write_file(path, bytes_->substr(0, cut) + std::string(4096, '\0'));
      std::unique_ptr<Analysis> a;
      ASSERT_NO_THROW(a = analyze_trace(path, false));
      EXPECT_TRUE(a->read.truncated);
      EXPECT_EQ(a->read.complete_bytes, c.begin);
      EXPECT_EQ(a->read.chunks, i);
      uint64_t events = 0;
      expect_same_numbers(replay_chunks(*trace_, i, &events), *a);
      // Zeros the chunk itself ends in, before the cut, are zeros of the tail.
      size_t kept = cut;
      while (kept > c.begin && (*bytes_)[kept - 1] == '\0') --kept;
      size_t zeros = (cut - kept) + 4096;
      EXPECT_EQ(a->read.tail, kept == c.begin ? std::to_string(zeros) + why
                                              : "a chunk cut off after " + std::to_string(kept - c.begin) +
                                                    " bytes, then " + std::to_string(zeros) + why);
      ++tried;
    }
  }
  EXPECT_GT(tried, 40u);
  // The whole trace, then zeros: every chunk.
  test::write_file(path, *bytes_ + std::string(4096, '\0'));
  std::unique_ptr<Analysis> a = analyze_trace(path, false);
  EXPECT_EQ(a->read.chunks, 21u);
  EXPECT_EQ(a->model.health().events, 16417u);
  EXPECT_TRUE(a->read.truncated);
  EXPECT_EQ(a->read.complete_bytes, bytes_->size());
  EXPECT_EQ(a->read.tail, "4096" + why);
}

// The size of a zstd frame header (RFC 8878, 3.1.1.1): magic 4, descriptor 1, window descriptor 1
// unless single-segment, dictionary id 0/1/2/4, content size 0/1 (single-segment)/2/4/8.
size_t frame_header_bytes(const std::string& bytes, size_t begin) {
  unsigned descriptor = uint8_t(bytes[begin + 4]);
  bool single_segment = descriptor & 0x20;
  size_t dictionary[] = {0, 1, 2, 4};
  size_t size_flag = descriptor >> 6;
  size_t content_size = size_flag == 0 ? (single_segment ? 1 : 0) : size_t(1) << size_flag;
  return 5 + (single_segment ? 0 : 1) + dictionary[descriptor & 3] + content_size;
}

TEST_F(CutRealTrace, DamagedBlockSizeRunningPastTheEndIsAnErrorNotACut) {
  // A chunk whose first block header says the block is one byte longer than everything that follows
  // in the file: read as a cut, the chunks after it would be silently dropped. Only sizes the zstd
  // decoder accepts on their own are used (at most the frame's window, its content size here, and
  // 128 KiB), so that the reader has to notice the complete chunks that follow.
  std::string path = test::temp_path("block-size-real.mtrace");
  size_t tried = 0;
  for (size_t i = 0; i + 1 < trace_->chunks.size(); ++i) {
    const Chunk& c = trace_->chunks[i];
    size_t block = c.begin + frame_header_bytes(*bytes_, c.begin);
    size_t past_end = bytes_->size() - (block + 3) + 1;
    unsigned long long content = ZSTD_getFrameContentSize(bytes_->data() + c.begin, c.end - c.begin);
    if (past_end > content || past_end > (128 << 10)) continue;
    SCOPED_TRACE("chunk at " + std::to_string(c.begin));
    ++tried;
    std::string damaged = *bytes_;
    uint32_t header = uint32_t(uint8_t(damaged[block])) | uint32_t(uint8_t(damaged[block + 1])) << 8 |
                      uint32_t(uint8_t(damaged[block + 2])) << 16;
    header = (header & 7) | uint32_t(past_end) << 3;  // keep the last-block flag and the block type
    for (int k = 0; k < 3; ++k) damaged[block + k] = char(header >> (8 * k));
    test::write_file(path, damaged);
    try {
      analyze_trace(path, false);
      ADD_FAILURE() << "read without error";
    } catch (const TraceError& e) {
      EXPECT_EQ(e.byte_offset(), c.begin) << e.what();
    }
  }
  EXPECT_EQ(tried, 6u);  // the chunks at 88,245, 98,858, 107,653, 117,068, 127,874 and 135,589
}

}  // namespace
}  // namespace memtrace
