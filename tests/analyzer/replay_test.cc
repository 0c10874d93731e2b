// model/replay.h: replaying a trace into a fresh model and looking at it at chosen moments (the model's
// figures there worked out by hand), stopping, layer hints, truncated and damaged files, and WalkBudget.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "model/replay.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::driver_free;

// Five driver-layer events on device 0, 10 ns apart (stack ids 0):
//   e0 t=10  alloc A 0x1000 100 B  -> allocated 100, live 1
//   e1 t=20  alloc B 0x2000 200 B  -> allocated 300, live 2
//   e2 t=30  free A                -> allocated 200, live 1
//   e3 t=40  alloc C 0x3000 50 B   -> allocated 250, live 2
//   e4 t=50  free B                -> allocated  50, live 1
// In two chunks (e0..e2, then e3, e4 and a TraceEnd), so that a cut file keeps the first.
test::TraceBuilder five_events() {
  test::TraceBuilder b;
  b.start();
  b.event(driver_alloc(0, 0x1000, 100, 10)).event(driver_alloc(0, 0x2000, 200, 10)).event(driver_free(0, 0x1000, 10));
  b.end_chunk();
  b.event(driver_alloc(0, 0x3000, 50, 10)).event(driver_free(0, 0x2000, 10)).end(5, 5);
  b.end_chunk();
  return b;
}

std::string write_trace(const std::string& name, const std::string& bytes) {
  std::string path = test::temp_path(name + ".mtrace");
  test::write_file(path, bytes);
  return path;
}

// What the model shows at a moment.
struct Seen {
  uint64_t event_index;
  uint64_t allocated_bytes;
  uint64_t driver_bytes;
  int64_t now_ns;
  size_t live;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> seen_at(const std::string& path, const std::vector<uint64_t>& moments, ReplayOutcome* outcome,
                          const std::map<int32_t, LayerHint>& hints = {}) {
  MemoryModel model;
  std::vector<Seen> seen;
  std::vector<ReplayMoment> after;  // right after each event
  for (uint64_t index : moments) after.push_back(ReplayMoment{index, false});
  *outcome = replay_to_moments(path, hints, model, after, [&](ReplayMoment moment) {
    DeviceTotals t = model.totals(0);
    seen.push_back({moment.event_index, t.allocated_bytes, t.driver_bytes, model.now_ns(), model.live_allocations()});
  });
  return seen;
}

TEST(Replay, CallsAtEachMomentWithTheModelThereAndStopsAfterTheLast) {
  std::string path = write_trace("moments", five_events().bytes());
  ReplayOutcome outcome;
  std::vector<Seen> seen = seen_at(path, {0, 2, 4}, &outcome);
  EXPECT_EQ(seen, (std::vector<Seen>{{0, 100, 100, 10, 1}, {2, 200, 200, 30, 1}, {4, 50, 50, 50, 1}}));
  EXPECT_TRUE(outcome.stopped);  // after e4: the TraceEnd after it is not read
  EXPECT_EQ(outcome.events, 5u);

  seen = seen_at(path, {1, 3}, &outcome);
  EXPECT_EQ(seen, (std::vector<Seen>{{1, 300, 300, 20, 2}, {3, 250, 250, 40, 2}}));
  EXPECT_TRUE(outcome.stopped);
  EXPECT_EQ(outcome.events, 4u);  // e4 is not applied
}

TEST(Replay, AMomentListedTwiceIsCalledOnce) {
  std::string path = write_trace("twice", five_events().bytes());
  ReplayOutcome outcome;
  std::vector<Seen> seen = seen_at(path, {1, 1, 2}, &outcome);
  EXPECT_EQ(seen, (std::vector<Seen>{{1, 300, 300, 20, 2}, {2, 200, 200, 30, 1}}));
  EXPECT_EQ(outcome.events, 3u);
}

TEST(Replay, MomentsPastTheLastEventAreNotCalledAndTheWholeFileIsRead) {
  std::string path = write_trace("past", five_events().bytes());
  ReplayOutcome outcome;
  std::vector<Seen> seen = seen_at(path, {3, 5, 99}, &outcome);
  EXPECT_EQ(seen, (std::vector<Seen>{{3, 250, 250, 40, 2}}));
  EXPECT_FALSE(outcome.stopped);
  EXPECT_EQ(outcome.events, 5u);
  EXPECT_FALSE(outcome.read.truncated);
  EXPECT_EQ(outcome.read.chunks, 2u);
  EXPECT_EQ(outcome.read.records, 7u);  // TraceStart, 5 events, TraceEnd
}

TEST(Replay, NoMomentsReadsNothing) {
  ReplayOutcome outcome;
  EXPECT_TRUE(seen_at(test::temp_path("never-written.mtrace"), {}, &outcome).empty());
  EXPECT_FALSE(outcome.stopped);
  EXPECT_EQ(outcome.events, 0u);
  EXPECT_EQ(outcome.read.records, 0u);
}

// With a hint that device 0 has a block layer, allocated is the live blocks from the first event on:
// none here, so 0 while the driver holds 100 and then 300.
TEST(Replay, GivesTheModelTheLayerHints) {
  std::string path = write_trace("hints", five_events().bytes());
  ReplayOutcome outcome;
  std::vector<Seen> seen = seen_at(path, {0, 1}, &outcome, {{0, LayerHint{.block_layer = true}}});
  EXPECT_EQ(seen, (std::vector<Seen>{{0, 0, 100, 10, 1}, {1, 0, 300, 20, 2}}));
}

// The second chunk cut off after 7 bytes: e0..e2 are replayed, the read says truncated, and a moment in
// the lost chunk never comes.
TEST(Replay, ATruncatedTraceIsReplayedUpToItsLastCompleteChunk) {
  test::TraceBuilder b = five_events();
  std::string bytes = b.bytes().substr(0, b.chunk_offsets()[1] + 7);
  std::string path = write_trace("truncated", bytes);
  ReplayOutcome outcome;
  std::vector<Seen> seen = seen_at(path, {2, 3}, &outcome);
  EXPECT_EQ(seen, (std::vector<Seen>{{2, 200, 200, 30, 1}}));
  EXPECT_FALSE(outcome.stopped);
  EXPECT_EQ(outcome.events, 3u);
  EXPECT_TRUE(outcome.read.truncated);
  EXPECT_EQ(outcome.read.complete_bytes, b.chunk_offsets()[1]);
}

TEST(Replay, ADamagedTraceThrowsTraceError) {
  std::string path = write_trace("damaged", "not a trace at all");
  ReplayOutcome outcome;
  EXPECT_THROW(seen_at(path, {0}, &outcome), TraceError);
}

// An observer with all three parts: before_event sees the model before the event, after_event after it,
// on_record every record that is not an event; kStop after e2 ends the replay there.
struct CountingObserver {
  const MemoryModel& model;
  std::vector<uint64_t> before_allocated, after_allocated;
  std::vector<proto::Record::KindCase> records;
  void before_event(const EventFields&) { before_allocated.push_back(model.totals(0).allocated_bytes); }
  ReplayStep after_event(const EventFields& event) {
    after_allocated.push_back(model.totals(0).allocated_bytes);
    return event.kind() == proto::FREE ? ReplayStep::kStop : ReplayStep::kGoOn;
  }
  void on_record(const proto::Record& record) { records.push_back(record.kind_case()); }
};

TEST(Replay, ObserverIsCalledAroundEveryEventAndStopsTheReplay) {
  std::string path = write_trace("observer", five_events().bytes());
  MemoryModel model;
  CountingObserver observer{model};
  ReplayOutcome outcome = replay_trace(path, {}, model, observer);
  EXPECT_EQ(observer.before_allocated, (std::vector<uint64_t>{0, 100, 300}));
  EXPECT_EQ(observer.after_allocated, (std::vector<uint64_t>{100, 300, 200}));
  EXPECT_EQ(observer.records, (std::vector<proto::Record::KindCase>{proto::Record::kStart}));
  EXPECT_TRUE(outcome.stopped);
  EXPECT_EQ(outcome.events, 3u);
  EXPECT_EQ(model.next_event_index(), 3u);
}

// slack 10 + 2 per event x 5 events = 20 allocations.
TEST(WalkBudget, RefusesAWalkPastItAndEveryWalkAfter) {
  WalkBudget budget(10, 2, 5);
  EXPECT_EQ(budget.left(), 20u);
  EXPECT_TRUE(budget.take(15));
  EXPECT_EQ(budget.left(), 5u);
  EXPECT_FALSE(budget.take(6));
  EXPECT_TRUE(budget.refused());
  EXPECT_FALSE(budget.take(1));  // would fit, but a walk was refused before it
  EXPECT_EQ(budget.left(), 5u);
}

TEST(WalkBudget, TakesExactlyWhatIsLeftAndSaturates) {
  WalkBudget budget(10, 2, 5);
  EXPECT_TRUE(budget.take(20));
  EXPECT_EQ(budget.left(), 0u);
  EXPECT_TRUE(budget.take(0));
  EXPECT_FALSE(budget.refused());
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(WalkBudget(1, kMax, 2).left(), kMax);
  EXPECT_EQ(WalkBudget(kMax, 1, 1).left(), kMax);
}

}  // namespace
}  // namespace memtrace
