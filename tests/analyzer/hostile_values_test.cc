// Values no tracer writes, from damaged or hostile traces: device ordinals outside what CUDA gives, graph
// launches that would replay more nodes than the trace's size allows, times and sizes at the ends of
// their types, and PyTorch totals the replay contradicts. Each is bounded or saturated, counted in the
// trace health, and shown there; every figure below is worked out by hand.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <sstream>

#include "model/first_allocation_times.h"
#include "model/memory_model.h"
#include "stacks/call_sites.h"
#include "trace_builder.h"
#include "util/checked_math.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::make_event;
using test::torch_event;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kHalf = uint64_t{1} << 63;  // two of these overflow a uint64_t sum

TEST(CheckedMath, SaturatesAtEachEndOfEachType) {
  EXPECT_EQ(saturating_add(INT64_MAX, int64_t{1}), INT64_MAX);
  EXPECT_EQ(saturating_add(INT64_MIN, int64_t{-1}), INT64_MIN);
  EXPECT_EQ(saturating_add(int64_t{-5}, int64_t{3}), -2);
  EXPECT_EQ(saturating_sub(INT64_MAX, INT64_MIN), INT64_MAX);
  EXPECT_EQ(saturating_sub(INT64_MIN, int64_t{1}), INT64_MIN);
  EXPECT_EQ(saturating_sub(int64_t{3}, int64_t{5}), -2);
  EXPECT_EQ(saturating_mul(INT64_MAX, int64_t{2}), INT64_MAX);
  EXPECT_EQ(saturating_mul(INT64_MIN, int64_t{2}), INT64_MIN);
  EXPECT_EQ(saturating_mul(INT64_MIN, int64_t{-1}), INT64_MAX);
  EXPECT_EQ(saturating_mul(int64_t{-3}, int64_t{4}), -12);
  EXPECT_EQ(saturating_add(kHalf, kHalf), UINT64_MAX);
  EXPECT_EQ(saturating_add(kHalf, kHalf - 1), UINT64_MAX);
  EXPECT_EQ(saturating_sub(uint64_t{3}, uint64_t{5}), 0u);
  EXPECT_EQ(saturating_mul(kHalf, uint64_t{2}), UINT64_MAX);
  EXPECT_EQ(saturating_mul(uint64_t{6}, uint64_t{7}), 42u);
  // 100 years = 36,525 days = 3,155,760,000 s.
  EXPECT_EQ(kMaxPlausibleDeltaNs, 3'155'760'000'000'000'000);
  EXPECT_TRUE(plausible_delta_ns(kMaxPlausibleDeltaNs));
  EXPECT_TRUE(plausible_delta_ns(-kMaxPlausibleDeltaNs));
  EXPECT_FALSE(plausible_delta_ns(kMaxPlausibleDeltaNs + 1));
  EXPECT_FALSE(plausible_delta_ns(-kMaxPlausibleDeltaNs - 1));
  EXPECT_FALSE(plausible_delta_ns(INT64_MIN));
  EXPECT_FALSE(plausible_delta_ns(INT64_MAX));
}

// Ordinals -1..1023 are replayed; every other one, 100,004 events of 100,004 distinct ordinals here, is
// counted and makes no state (before: a DeviceState, call-site array and totals each, 3.6 GiB for 100,000).
TEST(HostileValues, DeviceOrdinalsOutsideWhatCudaGivesAreCountedNotReplayed) {
  MemoryModel model;
  model.apply(driver_alloc(1023, 0x1000, kMiB, 10));
  model.apply(driver_alloc(-1, 0x2000, 2 * kMiB, 10));
  for (int32_t device : {1024, -2, INT32_MIN, INT32_MAX}) model.apply(driver_alloc(device, 0x3000, 4 * kMiB, 10));
  for (int32_t i = 0; i < 100'000; ++i) model.apply(driver_alloc(2000 + i, 0x4000 + uint64_t(i), kMiB, 1, 7));
  model.finish();
  ASSERT_EQ(model.devices().size(), 2u);
  EXPECT_EQ(model.devices().begin()->first, -1);
  EXPECT_EQ(model.devices().rbegin()->first, 1023);
  EXPECT_EQ(model.totals(1023).driver_bytes, kMiB);
  EXPECT_EQ(model.totals(-1).driver_bytes, 2 * kMiB);
  EXPECT_EQ(model.live_allocations(), 2u);
  EXPECT_EQ(model.health().events_with_bad_device, 100'004u);
  EXPECT_EQ(model.health().events, 100'006u);
  EXPECT_EQ(model.now_ns(), 60 + 100'000);  // their times still count
  EXPECT_EQ(model.first_allocation_ns().size(), 2u);
}

// A budget of 2,000 entries: the first id makes the array 1,024 long (976 left); id 1,500 would double it
// (1,024 more), so it goes to the hash table and the array stays 1,024 for good, id 1,100 going there too.
TEST(HostileValues, CallSiteArraysStopGrowingPastTheirSharedBudget) {
  SiteFirstTimes times;
  uint64_t left = 2000;
  times.note(5, 50, left);
  EXPECT_EQ(times.array_size(), 1024u);
  EXPECT_EQ(left, 976u);
  times.note(1500, 150, left);
  times.note(1000, 100, left);
  times.note(1100, 110, left);
  times.note(1500, 999, left);  // not the first time: kept as it was
  EXPECT_EQ(times.array_size(), 1024u);
  EXPECT_EQ(left, 976u);
  for (auto [id, ns] : {std::pair<uint64_t, int64_t>{5, 50}, {1000, 100}, {1100, 110}, {1500, 150}}) {
    ASSERT_NE(times.find(id), nullptr) << id;
    EXPECT_EQ(*times.find(id), ns) << id;
  }
  EXPECT_EQ(times.find(6), nullptr);
  uint64_t visited = 0;
  times.for_each([&](uint64_t, int64_t) { ++visited; });
  EXPECT_EQ(visited, 4u);
}

// The model's budget is two full arrays (2 x 2^20 ids): devices 0 and 1 take it all with an id just
// below 2^20 each; device 2's first id then goes to its hash table. Every time is still found.
TEST(HostileValues, CallSiteArraysOfAllDevicesShareOneBudget) {
  const uint64_t last_dense_id = SiteFirstTimes::kMaxDenseStackId - 1;
  MemoryModel model;
  EXPECT_EQ(model.site_array_entries_left(), 2u << 20);
  model.apply(driver_alloc(0, 0x1000, kMiB, 10, last_dense_id));
  EXPECT_EQ(model.site_array_entries_left(), 1u << 20);
  model.apply(driver_alloc(1, 0x2000, kMiB, 10, last_dense_id));
  EXPECT_EQ(model.site_array_entries_left(), 0u);
  model.apply(driver_alloc(2, 0x3000, kMiB, 10, 5));
  EXPECT_EQ(model.site_array_entries_left(), 0u);
  std::map<std::pair<int32_t, uint64_t>, int64_t> expected = {{{0, last_dense_id}, 10},
                                                              {{1, last_dense_id}, 20},
                                                              {{2, 5}, 30}};
  EXPECT_EQ(model.first_allocation_ns(), expected);
}

proto::Event graph_node(proto::EventKind kind, uint64_t address, uint64_t size, uint64_t graph) {
  proto::Event e =
      make_event(kind, proto::LAYER_BLOCK,
                 kind == proto::ALLOC ? proto::CU_GRAPH_ADD_MEM_ALLOC_NODE : proto::CU_GRAPH_ADD_MEM_FREE_NODE, 0,
                 address, size, 1000);
  e.set_graph(graph);
  return e;
}
proto::Event graph_event(proto::EventKind kind, uint64_t exec, uint64_t graph) {
  proto::Event e = make_event(kind, proto::LAYER_UNKNOWN,
                              kind == proto::GRAPH_INSTANTIATE ? proto::CU_GRAPH_INSTANTIATE : proto::CU_GRAPH_LAUNCH,
                              0, exec, 0, 1000);
  e.set_graph(graph);
  return e;
}
proto::Event pool_free(uint64_t address) {
  return make_event(proto::FREE, proto::LAYER_BLOCK, proto::CUDA_FREE_ASYNC, 0, address, 0, 1000);
}

// A graph of 3 memory nodes (alloc A 1 MiB, alloc B 2 MiB, free A), a budget of 6 replays and none per
// event: launches 1 and 2 replay (3 + 3), launches 3 and 4 would take it to 9 and are counted instead.
// B, freed outside the graph after each launch, is then freed twice more without being allocated.
TEST(HostileValues, GraphLaunchesPastTheReplayBudgetAreCountedNotReplayed) {
  MemoryModel model;
  model.set_graph_replay_budget(6, 0);
  for (const proto::Event& e :
       {graph_node(proto::ALLOC, 0xA000000, kMiB, 0x6A), graph_node(proto::ALLOC, 0xB000000, 2 * kMiB, 0x6A),
        graph_node(proto::FREE, 0xA000000, 0, 0x6A), graph_event(proto::GRAPH_INSTANTIATE, 0xE1, 0x6A)})
    model.apply(e);
  for (int launch = 0; launch < 4; ++launch) {
    model.apply(graph_event(proto::GRAPH_LAUNCH, 0xE1, 0));
    EXPECT_EQ(model.totals(0).allocated_bytes, launch < 2 ? 2 * kMiB : 0) << launch;
    model.apply(pool_free(0xB000000));
  }
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(model.health().graph_launches_not_replayed, 2u);
  EXPECT_EQ(model.health().double_frees, 2u);
  EXPECT_EQ(model.health().unknown_frees, 0u);
  EXPECT_EQ(d.block_allocations, 4u);  // A and B, twice
  EXPECT_EQ(d.block_frees, 4u);        // A in each replayed launch, B after each
  EXPECT_EQ(model.live_allocations(), 0u);
}

// With the default per-event allowance (64) and no slack at all, a graph of 64 nodes launched after
// nothing else is never limited: the replays (64 per launch) never catch up with 64 per event read.
TEST(HostileValues, GraphsOfUpTo64NodesAreNeverLimited) {
  MemoryModel model;
  model.set_graph_replay_budget(0, MemoryModel::kGraphReplaysPerEvent);
  for (uint64_t i = 0; i < 32; ++i) {
    model.apply(graph_node(proto::ALLOC, 0x1000000 * (i + 1), kMiB, 0x6A));
    model.apply(graph_node(proto::FREE, 0x1000000 * (i + 1), 0, 0x6A));
  }
  model.apply(graph_event(proto::GRAPH_INSTANTIATE, 0xE1, 0x6A));
  for (int launch = 0; launch < 1000; ++launch) model.apply(graph_event(proto::GRAPH_LAUNCH, 0xE1, 0));
  EXPECT_EQ(model.health().graph_launches_not_replayed, 0u);
  EXPECT_EQ(model.devices().at(0).block_allocations, 32'000u);
  EXPECT_EQ(model.devices().at(0).block_frees, 32'000u);
}

// What torch.compile mode="reduce-overhead" makes, with the default budget: a graph of 119 memory nodes
// (60 allocations, 59 of them freed inside it, the last an output freed after each launch) launched 2,000
// times, nothing else in the trace: 238,000 replays, all within the budget.
TEST(HostileValues, AReduceOverheadStyleGraphIsReplayedAtEveryLaunch) {
  MemoryModel model;
  for (uint64_t i = 0; i < 60; ++i) model.apply(graph_node(proto::ALLOC, 0x1000000 * (i + 1), kMiB, 0x6A));
  for (uint64_t i = 0; i < 59; ++i) model.apply(graph_node(proto::FREE, 0x1000000 * (i + 1), 0, 0x6A));
  model.apply(graph_event(proto::GRAPH_INSTANTIATE, 0xE1, 0x6A));
  for (int launch = 0; launch < 2000; ++launch) {
    model.apply(graph_event(proto::GRAPH_LAUNCH, 0xE1, 0));
    model.apply(pool_free(0x1000000 * 60));
  }
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(model.health().graph_launches_not_replayed, 0u);
  EXPECT_EQ(d.block_allocations, 120'000u);
  EXPECT_EQ(d.block_frees, 120'000u);
  EXPECT_EQ(d.peak_blocks.bytes, kMiB);  // the model's totals are taken after each event
  EXPECT_EQ(model.live_allocations(), 0u);
  EXPECT_EQ(model.health().double_frees + model.health().unknown_frees, 0u);
}

// Deltas at the ends of int64_t: the time saturates, and each delta beyond 100 years is counted.
TEST(HostileValues, TimesSaturateAndHugeStepsAreCounted) {
  MemoryModel model;
  model.apply(driver_alloc(0, 0x1000, kMiB, INT64_MAX));
  model.apply(driver_alloc(0, 0x2000, kMiB, INT64_MAX));  // would wrap
  EXPECT_EQ(model.now_ns(), INT64_MAX);
  model.apply(driver_alloc(0, 0x3000, kMiB, INT64_MIN));  // INT64_MAX + INT64_MIN = -1
  EXPECT_EQ(model.now_ns(), -1);
  model.apply(driver_alloc(0, 0x4000, kMiB, INT64_MIN));
  EXPECT_EQ(model.now_ns(), INT64_MIN);
  model.apply(driver_alloc(0, 0x5000, kMiB, kMaxPlausibleDeltaNs));  // 100 years exactly: plausible
  proto::TraceEnd end;
  end.set_time_delta_ns(-kMaxPlausibleDeltaNs - 1);
  model.apply_end(end);
  EXPECT_EQ(model.now_ns(), INT64_MIN);  // INT64_MIN + 100 years - (100 years + 1) saturates
  EXPECT_EQ(model.health().implausible_time_deltas, 5u);
  EXPECT_EQ(model.health().backward_timestamps, 3u);
}

// Two allocations of 2^63 bytes: their sum saturates instead of wrapping to 0, and each is counted as a
// size no device holds. Freeing one takes 2^63 off the saturated sum (the lost byte stays lost).
TEST(HostileValues, SizesSaturateAndHugeOnesAreCounted) {
  MemoryModel model;
  model.apply(driver_alloc(0, 0x1000, kHalf, 10));
  model.apply(driver_alloc(0, 0x2000, kHalf, 10));
  EXPECT_EQ(model.totals(0).driver_bytes, UINT64_MAX);
  EXPECT_EQ(model.devices().at(0).peak_driver.bytes, UINT64_MAX);
  model.apply(test::driver_free(0, 0x1000, 10));
  EXPECT_EQ(model.totals(0).driver_bytes, UINT64_MAX - kHalf);
  // PyTorch blocks (the fast path leaves such sizes to the general path, which counts them).
  model.apply(torch_event(proto::ALLOC, 1, 0x10000, kHalf, kHalf, kHalf, 10));
  model.apply(torch_event(proto::ALLOC, 1, 0x20000, kHalf, UINT64_MAX, UINT64_MAX, 10));
  EXPECT_EQ(model.devices().at(1).torch_block_bytes, UINT64_MAX);
  EXPECT_EQ(model.totals(1).allocated_bytes, UINT64_MAX);
  EXPECT_EQ(model.health().implausible_sizes, 4u);
  EXPECT_EQ(model.health().allocated_vs_pytorch.events, 0u);
  // Just below 1 PiB is a size a device could hold.
  model.apply(driver_alloc(2, 0x3000, kMaxPlausibleBytes - 1, 10));
  EXPECT_EQ(model.health().implausible_sizes, 4u);
  model.apply(driver_alloc(2, 0x4000, kMaxPlausibleBytes, 10));
  EXPECT_EQ(model.health().implausible_sizes, 5u);
}

TEST(HostileValues, CallSiteBytesSaturate) {
  LiveAllocation a{.space = AddressSpace::kTorchBlock, .device = 0, .size_bytes = kHalf, .stack_id = 1};
  std::vector<CallSite> sites = group_by_call_site({a, a, a});
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].bytes, UINT64_MAX);
  EXPECT_EQ(sites[0].count, 3u);
}

// Live at exit from one site at INT64_MIN, 0 and INT64_MAX - 1, exit at INT64_MAX: the span and the
// window both saturate at INT64_MAX (before: signed overflow, undefined), so the site grows; the
// intervals are INT64_MAX (saturated) and INT64_MAX - 1, whose lower median is the second.
TEST(HostileValues, LeakGrowthOfTimesAtTheEndsOfInt64) {
  auto at = [](int64_t time_ns) {
    return LiveAllocation{
        .space = AddressSpace::kTorchBlock, .device = 0, .size_bytes = kHalf, .stack_id = 1, .time_ns = time_ns};
  };
  std::vector<LeakSite> leaks =
      find_leak_sites({at(INT64_MIN), at(0), at(INT64_MAX - 1)}, INT64_MAX, {{{0, 1}, INT64_MIN}}, SiteGrouping());
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_TRUE(leaks[0].growing);
  EXPECT_EQ(leaks[0].growth_count, 3u);
  EXPECT_EQ(leaks[0].growth_bytes_per_step, kHalf);
  EXPECT_EQ(leaks[0].site.bytes, UINT64_MAX);
  EXPECT_DOUBLE_EQ(leaks[0].median_interval_s, double(INT64_MAX - 1) / 1e9);
}

// Device 0, one event every 1000 ns, PyTorch reserved 8 MiB throughout (a segment of 8 MiB):
//   e0 segment                 replay blocks 0      (driver layer: nothing to check)
//   e1 block A 1 MiB           replay 1 MiB  PyTorch 1 MiB
//   e2 block B 1 MiB           replay 2 MiB  PyTorch 2 MiB
//      (the free of A is lost: PyTorch 1 MiB)
//   e3 block C 1 MiB           replay 3 MiB  PyTorch 2 MiB   <- first disagreement
//   e4 free B                  replay 2 MiB  PyTorch 1 MiB
//   e5 block D 1 MiB           replay 3 MiB  (total left out, as version 2 may: not compared)
//   e6 block E 6 MiB           replay 9 MiB  PyTorch 8 MiB; 9 MiB allocated > 8 MiB reserved
std::vector<proto::Event> torch_events_with_a_lost_free() {
  proto::Event e5 = torch_event(proto::ALLOC, 0, 0x400000, kMiB, 0, 8 * kMiB, 1000);
  e5.clear_allocator_allocated_bytes();
  return {driver_alloc(0, 0x100000, 8 * kMiB, 1000),
          torch_event(proto::ALLOC, 0, 0x100000, kMiB, kMiB, 8 * kMiB, 1000),
          torch_event(proto::ALLOC, 0, 0x200000, kMiB, 2 * kMiB, 8 * kMiB, 1000),
          torch_event(proto::ALLOC, 0, 0x300000, kMiB, 2 * kMiB, 8 * kMiB, 1000),
          torch_event(proto::FREE, 0, 0x200000, 0, kMiB, 8 * kMiB, 1000),
          e5,
          torch_event(proto::ALLOC, 0, 0x500000, 6 * kMiB, 8 * kMiB, 8 * kMiB, 1000)};
}

void expect_lost_free_found(const MemoryModel& model) {
  const FigureMismatch& m = model.health().allocated_vs_pytorch;
  EXPECT_EQ(m.events, 3u);  // e3, e4, e6
  EXPECT_EQ(m.event_index, 3u);
  EXPECT_EQ(m.time_ns, 4000);
  EXPECT_EQ(m.device, 0);
  EXPECT_EQ(m.replay_bytes, 3 * kMiB);
  EXPECT_EQ(m.trace_bytes, 2 * kMiB);
  const FigureMismatch& r = model.health().allocated_above_reserved;
  EXPECT_EQ(r.events, 1u);
  EXPECT_EQ(r.event_index, 6u);
  EXPECT_EQ(r.time_ns, 7000);
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.replay_bytes, 9 * kMiB);
  EXPECT_EQ(r.trace_bytes, 8 * kMiB);
}

TEST(HostileValues, ALostFreeShowsAgainstPyTorchsOwnTotals) {
  MemoryModel fast;
  for (const proto::Event& e : torch_events_with_a_lost_free()) fast.apply(e);
  EXPECT_EQ(fast.fast_path_events(), 5u);  // e2..e6: the fast path checks too
  expect_lost_free_found(fast);
  MemoryModel general;
  general.set_fast_paths(false);
  for (const proto::Event& e : torch_events_with_a_lost_free()) general.apply(e);
  EXPECT_EQ(general.fast_path_events(), 0u);
  expect_lost_free_found(general);
}

// A trace with one of each: the health lines of `summary` and the keys of `summary --json`.
std::string hostile_trace() {
  test::TraceBuilder b;
  b.start();
  for (const proto::Event& e : torch_events_with_a_lost_free()) b.event(e);
  b.event(driver_alloc(4096, 0x9000000, kMiB, 1000));             // e7: ordinal past 1023
  b.event(driver_alloc(0, 0xA000000, kMaxPlausibleBytes, 1000));  // e8: 1 PiB
  b.event(test::finalizing(INT64_MAX));                           // e9: 292 years later
  b.end_chunk();
  std::string path = test::temp_path("hostile-values.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

TEST(HostileValues, HealthShowsEachNewCountOnItsOwnLine) {
  std::string path = hostile_trace();
  std::string text = test::memtrace_stdout("summary " + path);
  for (const char* line : {
           "  events of a device ordinal outside -1..1023 (not replayed) 1\n",
           "  events with a size or allocator total of 1 PiB or more (beyond any device) 1\n",
           "  time steps of more than 100 years 1\n",
           "  ALLOCATED DIFFERS FROM PYTORCH'S OWN TOTAL at 3 events: first after event 3 (0.000 s), device 0: "
           "memtrace 3.00 MiB (3,145,728 B), PyTorch 2.00 MiB (2,097,152 B)\n",
           "  ALLOCATED ABOVE RESERVED at 1 PyTorch event: first after event 6 (0.000 s), device 0: allocated 9.00 MiB "
           "(9,437,184 B), reserved 8.00 MiB (8,388,608 B)\n",
       })
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  EXPECT_EQ(text.find("graph launches not replayed"), std::string::npos);
  nlohmann::json trace = nlohmann::json::parse(test::memtrace_stdout("summary --json " + path))["trace"];
  EXPECT_EQ(trace["events_with_bad_device"], 1);
  EXPECT_EQ(trace["implausible_sizes"], 1);
  EXPECT_EQ(trace["implausible_time_deltas"], 1);
  EXPECT_FALSE(trace.contains("graph_launches_not_replayed"));
  EXPECT_EQ(trace["allocated_vs_pytorch"], (nlohmann::json{{"events", 3},
                                                           {"first_event", 3},
                                                           {"first_time_s", 4e-6},
                                                           {"device", 0},
                                                           {"memtrace_bytes", 3 * kMiB},
                                                           {"pytorch_bytes", 2 * kMiB}}));
  EXPECT_EQ(trace["allocated_above_reserved"], (nlohmann::json{{"events", 1},
                                                               {"first_event", 6},
                                                               {"first_time_s", 7e-6},
                                                               {"device", 0},
                                                               {"allocated_bytes", 9 * kMiB},
                                                               {"reserved_bytes", 8 * kMiB}}));
}

// The OOM report's "N s earlier" of a sample 2^63 - 1 ns before the failure at most: a sample at INT64_MIN
// and a failure at INT64_MAX - 1 are INT64_MAX apart once saturated (before: signed overflow).
TEST(HostileValues, OomSampleAgeSaturates) {
  test::TraceBuilder b;
  b.start();
  proto::Event sample = make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, 0, 0, 0, INT64_MIN);
  sample.set_device_free_bytes(kMiB);
  sample.set_device_total_bytes(8 * kMiB);
  b.event(sample);                       // t = INT64_MIN
  b.event(test::finalizing(INT64_MAX));  // t = -1
  proto::Event oom = make_event(proto::OOM, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0, 2 * kMiB, INT64_MAX);
  oom.set_result(2);
  oom.set_device_free_bytes(kMiB);
  oom.set_device_total_bytes(8 * kMiB);
  b.event(oom);  // t = INT64_MAX - 1
  b.end_chunk();
  std::string path = test::temp_path("hostile-oom-times.mtrace");
  test::write_file(path, b.bytes());
  std::string text = test::memtrace_stdout("oom " + path);
  EXPECT_NE(text.find("latest before the failure (9223372036.855 s earlier)"), std::string::npos) << text;
}

// Each device's blocks at addresses of their own (addresses are process-wide). Version 2 derives a
// left-out reserved total from the device's previous TORCH_ALLOCATOR event, looked up
// by device (a hash table: a file naming a new device in every event costs O(1) per event, not O(devices)).
TEST(HostileValues, DerivedTotalsFollowEachOfManyDevices) {
  test::TraceBuilder b(2);
  b.start();
  for (int32_t device = 0; device < 1000; ++device)
    b.event(torch_event(proto::ALLOC, device, uint64_t(device) << 24, kMiB, kMiB, uint64_t(device + 1) * kMiB, 1000));
  for (int32_t device = 999; device >= 0; --device) {
    proto::Event e = torch_event(proto::ALLOC, device, (uint64_t(device) << 24) + kMiB, kMiB, 2 * kMiB, 0, 1000);
    e.clear_allocator_reserved_bytes();
    e.clear_allocator_allocated_bytes();
    b.event(e);
  }
  b.end_chunk();
  std::string path = test::temp_path("hostile-many-devices.mtrace");
  test::write_file(path, b.bytes());
  nlohmann::json json = nlohmann::json::parse(test::memtrace_stdout("summary --json " + path));
  ASSERT_EQ(json["devices"].size(), 1000u);
  for (const nlohmann::json& d : json["devices"]) {
    int device = d["device"];
    EXPECT_EQ(d["final_reserved_bytes"], uint64_t(device + 1) * kMiB) << device;
    EXPECT_EQ(d["final_allocated_bytes"], 2 * kMiB) << device;
  }
  EXPECT_FALSE(json["trace"].contains("allocated_vs_pytorch"));
}

}  // namespace
}  // namespace memtrace
