// NVTX ranges (read/nvtx_ranges.h): RangeName / RangeEvent records paired into ranges, by collect_nvtx_ranges,
// by the analysis's first pass (Analysis::nvtx_ranges) and shown by `memtrace dump`; hostile input never fails.
// Every expected value is worked out by hand from the records each test writes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "read/nvtx_ranges.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::TraceBuilder;

proto::Record range_name(uint64_t id, const std::string& name) {
  proto::Record r;
  r.mutable_range_name()->set_id(id);
  r.mutable_range_name()->set_name(name);
  return r;
}

proto::Record range_event(proto::RangeEvent::Kind kind, uint64_t name_id, uint32_t tid, uint64_t time_us,
                          uint64_t range_id = 0) {
  proto::Record r;
  auto* e = r.mutable_range_event();
  e->set_kind(kind);
  e->set_name_id(name_id);
  e->set_tid(tid);
  e->set_time_us(time_us);
  e->set_range_id(range_id);
  return r;
}

proto::Event alloc(uint64_t address, uint64_t size) { return test::driver_alloc(0, address, size, 1000); }

// One training step as the tracer writes it (thread 7): step { forward { alloc, alloc } backward { free } }, then
// a START/END "optimizer" range (ended by thread 8) around an alloc, then a second "step" push left open.
// Events: 0 alloc A, 1 alloc B, 2 free B, 3 alloc C, 4 alloc D.
std::string training_trace() {
  TraceBuilder b(3);
  b.start();
  b.record(range_name(1, "step")).record(range_event(proto::RangeEvent::PUSH, 1, 7, 10));
  b.record(range_name(2, "forward")).record(range_event(proto::RangeEvent::PUSH, 2, 7, 11));
  b.event(alloc(0x1000, 100)).event(alloc(0x2000, 200));
  b.record(range_event(proto::RangeEvent::POP, 0, 7, 20));
  b.record(range_name(3, "backward")).record(range_event(proto::RangeEvent::PUSH, 3, 7, 21));
  b.event(test::driver_free(0, 0x2000, 1000));
  b.record(range_event(proto::RangeEvent::POP, 0, 7, 30)).record(range_event(proto::RangeEvent::POP, 0, 7, 31));
  b.end_chunk();  // ranges carry across chunks
  b.record(range_name(4, "optimizer")).record(range_event(proto::RangeEvent::START, 4, 7, 40, 77));
  b.record(range_event(proto::RangeEvent::MARK, 1, 7, 41));  // a mark is no range
  b.event(alloc(0x3000, 300));
  b.record(range_event(proto::RangeEvent::END, 0, 8, 50, 77));
  b.record(range_event(proto::RangeEvent::PUSH, 1, 7, 60));
  b.event(alloc(0x4000, 400));
  b.end_chunk();
  const std::string path = test::temp_path("nvtx_training.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

void expect_range(const NvtxRange& r, const std::string& name, uint32_t tid, uint32_t depth, int64_t begin_ns,
                  int64_t end_ns, uint64_t first_event, uint64_t end_event) {
  EXPECT_EQ(r.name, name);
  EXPECT_EQ(r.tid, tid) << name;
  EXPECT_EQ(r.depth, depth) << name;
  EXPECT_EQ(r.begin_ns, begin_ns) << name;
  EXPECT_EQ(r.end_ns, end_ns) << name;
  EXPECT_EQ(r.first_event, first_event) << name;
  EXPECT_EQ(r.end_event, end_event) << name;
}

void expect_training_ranges(const std::vector<NvtxRange>& ranges) {
  ASSERT_EQ(ranges.size(), 5u);
  expect_range(ranges[0], "step", 7, 0, 10'000, 31'000, 0, 3);
  expect_range(ranges[1], "forward", 7, 1, 11'000, 20'000, 0, 2);
  expect_range(ranges[2], "backward", 7, 1, 21'000, 30'000, 2, 3);
  expect_range(ranges[3], "optimizer", 7, 0, 40'000, 50'000, 3, 4);
  expect_range(ranges[4], "step", 7, 0, 60'000, -1, 4, 5);  // never popped: to the trace's end
}

TEST(NvtxRanges, CollectPairsPushPopAndStartEndWithTheEventsInside) {
  expect_training_ranges(collect_nvtx_ranges(training_trace()));
}

TEST(NvtxRanges, TheAnalysisFirstPassHandsTheSameRangesOver) {
  auto analysis = analyze_trace(training_trace(), /*with_live_at_peak=*/false);
  expect_training_ranges(analysis->nvtx_ranges);
  EXPECT_EQ(analysis->model.next_event_index(), 5u);  // the range records are not events
}

TEST(NvtxRanges, ATraceWithoutRangesHasNone) {
  TraceBuilder b(3);
  b.start().event(alloc(0x1000, 100)).end_chunk();
  const std::string path = test::temp_path("nvtx_none.mtrace");
  test::write_file(path, b.bytes());
  EXPECT_TRUE(collect_nvtx_ranges(path).empty());
}

TEST(NvtxRanges, HostileRecordsAreSkippedNeverFatal) {
  NvtxRangeCollector c;
  c.on_record(range_event(proto::RangeEvent::POP, 0, 5, 1), 0);              // a pop with no push
  c.on_record(range_event(proto::RangeEvent::END, 0, 5, 2, 99), 0);          // an end of an unknown id
  c.on_record(range_event(proto::RangeEvent::PUSH, 42, 5, 3), 1);            // a name never defined
  c.on_record(range_event(proto::RangeEvent::START, 9, 5, 4, 1), 2);         // name defined after its use
  c.on_record(range_event(proto::RangeEvent::START, 0, 6, 5, 1), 3);         // the same id again
  c.on_record(range_event(static_cast<proto::RangeEvent::Kind>(17), 9, 5, 6), 3);  // a kind newer than this reader
  c.on_record(range_name(9, "late\x1b[2J" + std::string(300, 'y')), 3);      // control bytes kept, cut to 255
  c.on_record(range_name(9, "redefined"), 3);                                // the first definition wins
  c.on_record(range_event(proto::RangeEvent::END, 0, 6, UINT64_MAX, 1), 4);  // ends the second START of id 1
  std::vector<NvtxRange> ranges = c.finish(6);
  EXPECT_EQ(c.unmatched(), 2u);
  ASSERT_EQ(ranges.size(), 3u);
  expect_range(ranges[0], "", 5, 0, 3'000, -1, 1, 6);
  const std::string late = "late\x1b[2J" + std::string(255 - 8, 'y');
  expect_range(ranges[1], late, 5, 0, 4'000, -1, 2, 6);  // its id was taken over: never ended
  // A time past what int64 nanoseconds hold is clamped.
  expect_range(ranges[2], "", 6, 0, 5'000, int64_t(INT64_MAX / 1000) * 1000, 3, 4);
}

TEST(NvtxRanges, NamesAreCutAtAUtf8Boundary) {
  NvtxRangeCollector c;
  // 254 ASCII bytes then "é" (2 bytes): byte 255 would split it, so 254 are kept.
  c.on_record(range_name(1, std::string(254, 'a') + "\xc3\xa9"), 0);
  c.on_record(range_event(proto::RangeEvent::PUSH, 1, 1, 0), 0);
  std::vector<NvtxRange> ranges = c.finish(0);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].name, std::string(254, 'a'));
}

TEST(NvtxRanges, MemoryIsBoundedForHugeCounts) {
  NvtxRangeCollector c;
  // Pushes past kMaxDepth on one thread are not kept, but their pops still match them: after kMaxDepth + 10
  // pushes and 10 pops, the kMaxDepth kept ranges are all still open.
  for (size_t i = 0; i < NvtxRangeCollector::kMaxDepth + 10; i++)
    c.on_record(range_event(proto::RangeEvent::PUSH, 0, 1, i), i);
  for (int i = 0; i < 10; i++) c.on_record(range_event(proto::RangeEvent::POP, 0, 1, 100000), 5000);
  c.on_record(range_event(proto::RangeEvent::POP, 0, 1, 100001), 5001);  // closes the innermost kept one
  std::vector<NvtxRange> ranges = c.finish(6000);
  EXPECT_EQ(c.ranges_not_kept(), 10u);
  EXPECT_EQ(c.unmatched(), 0u);
  ASSERT_EQ(ranges.size(), NvtxRangeCollector::kMaxDepth);
  EXPECT_EQ(ranges.back().depth, NvtxRangeCollector::kMaxDepth - 1);
  EXPECT_EQ(ranges.back().end_event, 5001u);
  EXPECT_EQ(ranges.back().end_ns, 100'001'000);
  EXPECT_EQ(ranges[ranges.size() - 2].end_ns, -1);
  EXPECT_EQ(ranges[ranges.size() - 2].end_event, 6000u);
}

TEST(NvtxRanges, DumpPrintsTheRecords) {
  test::MemtraceRun r = test::run_memtrace_binary("dump " + training_trace());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> ranges;
  size_t pos = 0;
  while (pos < r.out.size()) {
    size_t end = r.out.find('\n', pos);
    nlohmann::json j = nlohmann::json::parse(r.out.substr(pos, end - pos));
    if (j["record"] == "range_name" || j["record"] == "range_event") ranges.push_back(j);
    pos = end + 1;
  }
  ASSERT_EQ(ranges.size(), 14u);  // 4 names, 10 range events (6 before the first chunk's end, 4 after)
  EXPECT_EQ(ranges[0], nlohmann::json::parse(R"({"record":"range_name","id":1,"name":"step"})"));
  EXPECT_EQ(ranges[1], nlohmann::json::parse(
                           R"({"record":"range_event","kind":"PUSH","name_id":1,"tid":7,"time_us":10,"range_id":0})"));
  EXPECT_EQ(ranges[12], nlohmann::json::parse(
                            R"({"record":"range_event","kind":"END","name_id":0,"tid":8,"time_us":50,"range_id":77})"));
}

}  // namespace
}  // namespace memtrace
