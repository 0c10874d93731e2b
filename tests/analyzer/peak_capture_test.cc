// What was live at each device's peak allocated, taken during the one pass (PeakCapture): when it
// snapshots, what it keeps, its budget, and that it agrees with the replay definition (a second pass
// with the final layers as hints, stopped at the peak event) on random event sequences.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/peak_capture.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::driver_free;
using test::make_event;
using test::torch_event;

struct Captured {
  std::map<int32_t, std::vector<CallSite>> sites;
  std::map<int32_t, Fragmentation> fragmentation;
  std::vector<int32_t> missing;
  uint64_t walked = 0;
  bool gave_up = false;
};

// The one pass, as analyze_trace runs it.
Captured capture(const std::vector<proto::Event>& events) {
  MemoryModel model;
  PeakCapture peaks(model);
  for (const proto::Event& e : events) {
    peaks.before_event(e);
    model.apply(e);
    peaks.after_event();
  }
  model.finish();
  Captured c;
  c.missing = peaks.finish(c.sites, c.fragmentation);
  c.walked = peaks.allocations_walked();
  c.gave_up = peaks.gave_up();
  return c;
}

// The definition: replay with the layers of the whole trace as hints and look at each device's peak
// allocated event.
Captured replay_to_peaks(const std::vector<proto::Event>& events) {
  MemoryModel first;
  for (const proto::Event& e : events) first.apply(e);
  MemoryModel replay;
  replay.set_layer_hints(first.layer_hints());
  Captured c;
  for (uint64_t i = 0; i < events.size(); ++i) {
    replay.apply(events[i]);
    for (const auto& [device, state] : first.devices()) {
      if (state.peak_allocated().bytes == 0 || state.peak_allocated().event_index != i) continue;
      std::vector<LiveAllocation> live;
      replay.for_each_allocated(device, [&](const LiveAllocation& a) { live.push_back(a); });
      c.sites[device] = group_by_call_site(live);
      c.fragmentation[device] = replay.fragmentation(device);
    }
  }
  return c;
}

void expect_same_sites(const std::vector<CallSite>& got, const std::vector<CallSite>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].device, expected[i].device) << i;
    EXPECT_EQ(got[i].stack_id, expected[i].stack_id) << i;
    EXPECT_EQ(got[i].bytes, expected[i].bytes) << i;
    EXPECT_EQ(got[i].count, expected[i].count) << i;
  }
}

TEST(PeakCapture, SnapshotsOnceARunOfNewPeaksEnds) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0xA000, 100, 1, /*stack*/ 1),  // e0: 100, a new peak
      driver_alloc(0, 0xB000, 50, 1, 2),             // e1: 150, certainly a new peak: no snapshot before it
      driver_free(0, 0xA000, 1),                     // e2: may not raise it: snapshot of e1 first (walks A, B)
      driver_alloc(0, 0xC000, 200, 1, 3),            // e3: 250, a new peak (not predicted: 50 is below 150)
  };                                                 // end: snapshot of e3 (walks B, C)
  Captured c = capture(events);
  EXPECT_TRUE(c.missing.empty());
  EXPECT_FALSE(c.gave_up);
  EXPECT_EQ(c.walked, 4u);  // 2 + 2
  // At e3: C (200, stack 3) and B (50, stack 2), largest first.
  expect_same_sites(c.sites.at(0), {{0, 3, 200, 1}, {0, 2, 50, 1}});
  // No allocator layer: reserved = allocated = driver, so nothing between them; segments unknown.
  EXPECT_EQ(c.fragmentation.at(0), (Fragmentation{0, 0, 0, false}));
}

TEST(PeakCapture, AllocatorLayerSeenAfterThePeakChangesItsFragmentation) {
  constexpr uint64_t kMiB = 1 << 20;
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x100000, 2 * kMiB, 1, 9),  // e0: a segment; no PyTorch report yet
      // e1: a 1 MiB block at the segment's start with a report of 2 MiB reserved; e2: freed, so e1 is the peak.
      torch_event(proto::ALLOC, 0, 0x100000, kMiB, kMiB, 2 * kMiB, 1, 5),
      torch_event(proto::FREE, 0, 0x100000, 0, 0, 2 * kMiB, 1),
  };
  Captured c = capture(events);
  Captured expected = replay_to_peaks(events);
  ASSERT_TRUE(c.missing.empty());
  // At e1: reserved 2 MiB - allocated 1 MiB; one segment whose free tail is 1 MiB.
  EXPECT_EQ(c.fragmentation.at(0), (Fragmentation{kMiB, 1, kMiB, true}));
  EXPECT_EQ(c.fragmentation.at(0), expected.fragmentation.at(0));
  expect_same_sites(c.sites.at(0), {{0, 5, kMiB, 1}});
}

TEST(PeakCapture, GivesUpPastItsBudgetAndLeavesTheDeviceToTheReplay) {
  // Round i: X_i (1 byte, stack 1) and Y_i (1 byte, stack 2) allocated, Y_i freed. Each round's Y_i is
  // a new peak of i + 2 bytes that its free interrupts: a snapshot walking i + 2 allocations. After R
  // rounds the snapshots walked R (R - 1) / 2 + 2 R; R = 1500 gives 1,127,250, past the budget of
  // 2^20 + 1 x 4500 events = 1,053,076 walked allocations.
  constexpr uint64_t kRounds = 1500;
  std::vector<proto::Event> events;
  test::TraceBuilder trace;
  for (uint64_t i = 0; i < kRounds; ++i) {
    events.push_back(driver_alloc(0, 0x10000000 + 16 * i, 1, 1, 1));
    events.push_back(driver_alloc(0, 0x20000000, 1, 1, 2));
    events.push_back(driver_free(0, 0x20000000, 1));
  }
  for (const proto::Event& e : events) trace.event(e);
  trace.end_chunk();

  Captured c = capture(events);
  EXPECT_TRUE(c.gave_up);
  EXPECT_EQ(c.missing, (std::vector<int32_t>{0}));
  EXPECT_TRUE(c.sites.empty());

  // analyze_trace replays to the peak instead: the last round's Y, event 3 x 1499 + 1 = 4498, with
  // 1500 X (stack 1) and that Y (stack 2) live.
  std::string path = test::temp_path("peak-capture-budget.mtrace");
  test::write_file(path, trace.bytes());
  auto a = analyze_trace(path, /*with_live_at_peak=*/true);
  EXPECT_EQ(a->model.devices().at(0).peak_allocated().event_index, 4498u);
  EXPECT_EQ(a->model.devices().at(0).peak_allocated().bytes, 1501u);
  expect_same_sites(a->live_at_peak.at(0), {{0, 1, 1500, 1500}, {0, 2, 1, 1}});
}

// Random sequences over two devices mixing PyTorch blocks inside driver segments, pool blocks, arrays,
// managed memory, frees of unknown and already freed addresses, duplicate allocations and samples; on
// device 1 PyTorch's allocator reports only from the middle on, so snapshots taken before that must
// still give the fragmentation the replay sees with the final layers.
std::vector<proto::Event> random_events(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t k) { return rng() % k; };
  std::vector<proto::Event> events;
  for (size_t i = 0; i < n; ++i) {
    int32_t device = int32_t(pick(2));
    uint64_t base = 0x10000000ull * uint64_t(device + 1);
    uint64_t block = base + 0x1000 * pick(24);  // inside the first of two 64 KiB segments, or past it
    uint64_t segment = base + 0x10000 * pick(2);
    uint64_t size = 0x100 * (1 + pick(16));
    uint64_t stack = 1 + pick(4);
    bool torch_reports = device == 0 || i > n / 2;
    switch (pick(10)) {
      case 0: events.push_back(driver_alloc(device, segment, 0x10000, 1, stack)); break;
      case 1: events.push_back(driver_free(device, segment, 1)); break;
      case 2:
      case 3:
        if (torch_reports) events.push_back(torch_event(proto::ALLOC, device, block, size, 0, 0x20000, 1, stack));
        else
          events.push_back(
              make_event(proto::ALLOC, proto::LAYER_BLOCK, proto::CUDA_MALLOC_ASYNC, device, block, size, 1, stack));
        break;
      case 4:
      case 5:
        if (torch_reports) events.push_back(torch_event(proto::FREE, device, block, 0, 0, 0x20000, 1));
        else events.push_back(make_event(proto::FREE, proto::LAYER_BLOCK, proto::CUDA_FREE_ASYNC, device, block, 0, 1));
        break;
      case 6:
        events.push_back(
            driver_alloc(device, base + 0x800000 + 0x1000 * pick(4), size, 1, stack, proto::CUDA_MALLOC_ARRAY));
        break;
      case 7:
        events.push_back(
            driver_alloc(device, base + 0x900000 + 0x1000 * pick(4), size, 1, stack, proto::CUDA_MALLOC_MANAGED));
        break;
      case 8: events.push_back(driver_free(device, base + 0x800000 + 0x1000 * pick(4), 1)); break;
      default: {
        proto::Event e = make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, device, 0, 0, 1);
        e.set_device_free_bytes(1000 * pick(100));
        events.push_back(e);
      }
    }
  }
  return events;
}

TEST(PeakCapture, AgreesWithTheReplayOnRandomSequences) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::vector<proto::Event> events = random_events(seed, 300);
    Captured got = capture(events);
    Captured expected = replay_to_peaks(events);
    ASSERT_TRUE(got.missing.empty()) << "seed " << seed;
    ASSERT_EQ(got.sites.size(), expected.sites.size()) << "seed " << seed;
    for (const auto& [device, sites] : expected.sites) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " device " + std::to_string(device));
      expect_same_sites(got.sites.at(device), sites);
      EXPECT_EQ(got.fragmentation.at(device), expected.fragmentation.at(device));
    }
  }
}

}  // namespace
}  // namespace memtrace
