// model/timeline.h: the rows of `memtrace timeline`, one per change and sampled per interval, with the
// totals and fragmentation worked out by hand; what the first pass plans.
#include <gtest/gtest.h>

#include <vector>

#include "model/timeline.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::torch_event;

// One 1,000-byte driver segment at 0x10000 on device 0, then PyTorch blocks in it, 1,000 ns apart:
//   e0 t=1000  segment (driver 1000)
//   e1 t=2000  block 0x10000 300 B   (PyTorch: allocated 300, reserved 1000)
//   e2 t=3000  block 0x10200 100 B   (offset 512; allocated 400)
//   e3 t=4000  free the block at 0x10000  (allocated 100)
// The first pass sees both PyTorch layers on device 0, so from e0 on allocated is the live blocks and
// reserved PyTorch's reserved total (0 until e1 reports it).
std::string torch_trace(const std::string& name) {
  test::TraceBuilder b;
  b.start();
  b.event(driver_alloc(0, 0x10000, 1000, 1000));
  b.event(torch_event(proto::ALLOC, 0, 0x10000, 300, 300, 1000, 1000));
  b.event(torch_event(proto::ALLOC, 0, 0x10200, 100, 400, 1000, 1000));
  b.event(torch_event(proto::FREE, 0, 0x10000, 300, 100, 1000, 1000));
  b.end_chunk();
  std::string path = test::temp_path(name + ".mtrace");
  test::write_file(path, b.bytes());
  return path;
}

struct Expected {
  int64_t time_ns;
  DeviceTotals totals;
  Fragmentation fragmentation;
};

void expect_rows(const std::vector<TimelineRow>& rows, const std::vector<Expected>& expected) {
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].device, 0) << i;
    EXPECT_EQ(rows[i].time_ns, expected[i].time_ns) << i;
    EXPECT_EQ(rows[i].totals, expected[i].totals) << i;
    ASSERT_TRUE(rows[i].fragmentation.has_value()) << i;
    EXPECT_EQ(*rows[i].fragmentation, expected[i].fragmentation) << i;
  }
}

std::vector<TimelineRow> rows_of(const std::string& path, std::optional<int64_t> interval_ns, TimelineEnd* end,
                                 std::optional<bool> incremental = std::nullopt) {
  TimelinePlan plan = plan_timeline(path, interval_ns);
  if (incremental) plan.incremental_fragmentation = *incremental;
  std::vector<TimelineRow> rows;
  *end = replay_timeline(path, plan, interval_ns, [&](const TimelineRow& row) { rows.push_back(row); });
  return rows;
}

// Fragmentation {reserved - allocated, segments, largest free block, segments known}. The segment holds no
// block at e0 (no segment yet: count 0); then the gaps between blocks in [0, 1000): e1 [300, 1000) = 700;
// e2 [300, 512) = 212 and [612, 1000) = 388; e3 [0, 512) = 512 and 388.
const std::vector<Expected> kEveryChange = {
    {1000, {0, 0, 1000}, {0, 0, 0, true}},
    {2000, {300, 1000, 1000}, {700, 1, 700, true}},
    {3000, {400, 1000, 1000}, {600, 1, 388, true}},
    {4000, {100, 1000, 1000}, {900, 1, 512, true}},
};

TEST(Timeline, ARowForEveryChangeWithTheFragmentationThere) {
  std::string path = torch_trace("every-change");
  TimelineEnd end;
  expect_rows(rows_of(path, std::nullopt, &end), kEveryChange);
  EXPECT_EQ(end.events, 4u);
  EXPECT_EQ(end.start_monotonic_ns, 1'000'000'000u);  // TraceBuilder::start's
  EXPECT_FALSE(end.read.truncated);
  EXPECT_FALSE(end.fragmentation_unknown_from_event.has_value());
}

TEST(Timeline, KeptFragmentationGivesTheSameRowsAsWalked) {
  std::string path = torch_trace("kept");
  TimelineEnd end;
  expect_rows(rows_of(path, std::nullopt, &end, /*incremental=*/true), kEveryChange);
}

// Intervals of 2,500 ns: e0 and e1 fall in [0, 2500), e2 and e3 in [2500, 5000). A row per interval, at
// its last change, with the highest totals of the interval (e2's 400 allocated, not e3's 100) and the
// fragmentation at that last change (e1's, taken before e2 applies; e3's at the end).
TEST(Timeline, AnIntervalRowKeepsTheIntervalsHighestTotals) {
  std::string path = torch_trace("interval");
  TimelineEnd end;
  expect_rows(rows_of(path, 2500, &end), {
                                             {2000, {300, 1000, 1000}, {700, 1, 700, true}},
                                             {4000, {400, 1000, 1000}, {900, 1, 512, true}},
                                         });
  EXPECT_EQ(end.events, 4u);
}

TEST(Timeline, PlanLearnsTheLayers) {
  TimelinePlan plan = plan_timeline(torch_trace("plan-layers"), std::nullopt);
  ASSERT_EQ(plan.layer_hints.size(), 1u);
  EXPECT_TRUE(plan.layer_hints.at(0).block_layer);
  EXPECT_TRUE(plan.layer_hints.at(0).allocator_layer);
  EXPECT_FALSE(plan.incremental_fragmentation);  // 4 rows x 3 live <= 256 x 4 events
}

// 300 driver allocations, 1 ns apart, all live at the end: a row per event would walk 300 rows x 300 live =
// 90,000 allocations, more than 256 x 300 events = 76,800, so the fragmentation is kept instead. With one
// interval of 1 s for all of them, 1 row x 300 = 300 is far less: walked.
TEST(Timeline, PlanKeepsTheFragmentationWhereWalksWouldCostMore) {
  test::TraceBuilder b;
  b.start();
  for (uint64_t i = 0; i < 300; ++i) b.event(driver_alloc(0, 0x100000 + i * 0x1000, 16, 1));
  b.end_chunk();
  std::string path = test::temp_path("plan-keep.mtrace");
  test::write_file(path, b.bytes());
  EXPECT_TRUE(plan_timeline(path, std::nullopt).incremental_fragmentation);
  EXPECT_FALSE(plan_timeline(path, 1'000'000'000).incremental_fragmentation);
}

TEST(Timeline, ADamagedTraceThrowsBeforeAnyRow) {
  std::string path = test::temp_path("timeline-damaged.mtrace");
  test::write_file(path, "not a trace");
  EXPECT_THROW(plan_timeline(path, std::nullopt), TraceError);
}

}  // namespace
}  // namespace memtrace
