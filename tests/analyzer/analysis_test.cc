// The two-pass analysis of a file: peaks, live at peak (second pass), leak sites, frames.
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "analysis_trace.h"
#include "stacks/frames.h"

namespace memtrace {
namespace {

using test::kMiB;

std::unique_ptr<Analysis> analyze_small_trace(const std::string& name) {
  std::string path = test::temp_path(name);
  test::write_file(path, test::small_torch_trace().bytes());
  return analyze_trace(path, true);
}

TEST(Analysis, PeaksOfTheSmallTrace) {
  auto a = analyze_small_trace("analysis-peaks.mtrace");
  EXPECT_EQ(a->model.health().events, 8u);
  EXPECT_FALSE(a->read.truncated);
  const DeviceState& d = a->model.devices().at(0);
  EXPECT_EQ(d.peak_allocated().bytes, 5 * kMiB);
  EXPECT_EQ(d.peak_allocated().event_index, 3u);
  EXPECT_EQ(d.peak_allocated().time_ns, 4'000'000);
  EXPECT_EQ(d.peak_reserved().bytes, 8 * kMiB);
  EXPECT_EQ(d.peak_reserved().time_ns, 2'000'000);  // first PyTorch report
  EXPECT_EQ(d.peak_driver.bytes, 8 * kMiB);
  EXPECT_EQ(d.peak_driver.time_ns, 1'000'000);
  EXPECT_EQ(d.totals(), (DeviceTotals{2 * kMiB, 8 * kMiB, 8 * kMiB}));  // C and D live at the end
  EXPECT_EQ(a->duration_ns(), 8'000'000);
  ASSERT_EQ(a->info.notices.size(), 1u);
  EXPECT_TRUE(a->allocator_layer_seen());
}

TEST(Analysis, LiveAtPeakGroupedByCallSite) {
  auto a = analyze_small_trace("analysis-live-at-peak.mtrace");
  const auto& sites = a->live_at_peak.at(0);
  // At e3: B (3 MiB, stack 11) and A + C (1 + 1 MiB, stack 10). The 8 MiB segment is not a block.
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].stack_id, 11u);
  EXPECT_EQ(sites[0].bytes, 3 * kMiB);
  EXPECT_EQ(sites[0].count, 1u);
  EXPECT_EQ(sites[1].stack_id, 10u);
  EXPECT_EQ(sites[1].bytes, 2 * kMiB);
  EXPECT_EQ(sites[1].count, 2u);
}

TEST(Analysis, LeakSiteGrowsStepAfterStep) {
  auto a = analyze_small_trace("analysis-leaks.mtrace");
  // Live at finalization (7 ms): A, C, D from stack 10 at 2, 4, 6 ms. Span 4 ms >= 7 ms / 2.
  ASSERT_EQ(a->leaks.size(), 1u);
  const LeakSite& l = a->leaks[0];
  EXPECT_EQ(l.site.stack_id, 10u);
  EXPECT_EQ(l.site.bytes, 3 * kMiB);
  EXPECT_EQ(l.site.count, 3u);
  EXPECT_TRUE(l.growing);
  EXPECT_EQ(l.growth_count, 3u);
  EXPECT_EQ(l.growth_bytes_per_step, kMiB);
  EXPECT_DOUBLE_EQ(l.median_interval_s, 0.002);

  Symbolizer symbolizer(a->stacks.modules());
  FrameResolver resolver(a->stacks, symbolizer);
  std::vector<Frame> frames = resolver.resolve(l.site.stack_id).frames;
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_TRUE(frames[0].python);
  EXPECT_EQ(frames[0].function, "train_step");
  EXPECT_EQ(frames[0].file, "train.py");
  EXPECT_EQ(frames[0].line, 42u);
  EXPECT_EQ(frames[1].function, "<module>");
  EXPECT_EQ(frames[1].line, 50u);
}

TEST(Analysis, GrowthIsMeasuredUpToFinalizationNotTheTeardown) {
  // Three 256-byte blocks at 1, 2, 3 ms, finalization at 4 ms, then 100 ms of teardown before the end
  // record. Span 2 ms >= 4 ms / 2: growing, although 2 ms is far less than half of 104 ms.
  constexpr int64_t ms = 1'000'000;
  test::TraceBuilder b;
  b.start().stack(10, {test::kPy | 1}).python_frame(1, "loop.py", "step", 7);
  for (uint64_t i = 0; i < 3; ++i)
    b.event(test::torch_event(proto::ALLOC, 0, 0x1000 + 256 * i, 256, 256 * (i + 1), 2 * kMiB, ms, 10));
  b.event(test::finalizing(ms)).end(4, 100 * ms).end_chunk();
  std::string path = test::temp_path("analysis-teardown.mtrace");
  test::write_file(path, b.bytes());
  auto a = analyze_trace(path, false);
  EXPECT_EQ(a->duration_ns(), 104 * ms);
  EXPECT_EQ(a->leak_window_ns(), 4 * ms);
  ASSERT_EQ(a->leaks.size(), 1u);
  EXPECT_TRUE(a->leaks[0].growing);
  EXPECT_EQ(a->leaks[0].growth_bytes_per_step, 256u);
  EXPECT_DOUBLE_EQ(a->leaks[0].median_interval_s, 0.001);
}

TEST(Analysis, TruncatedTraceKeepsCompleteChunks) {
  test::TraceBuilder b = test::small_torch_trace();
  std::string path = test::temp_path("analysis-truncated.mtrace");
  test::write_file(path, b.bytes().substr(0, b.bytes().size() - 3));  // cut inside the last chunk
  auto a = analyze_trace(path, true);
  EXPECT_TRUE(a->read.truncated);
  EXPECT_EQ(a->model.health().events, 3u);  // e0..e2 from chunk 1
  EXPECT_EQ(a->last_event_time_ns, 3'000'000);
  EXPECT_EQ(a->model.devices().at(0).peak_allocated().bytes, 4 * kMiB);
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// A program handler recovered from the signal: events after TraceEnd{SIGNAL} reopen the trace, and the
// TraceEnd that counts is the last one (none here: the job was then cut off).
TEST(Analysis, EventsAfterASignalEndMeanTheProcessSurvivedIt) {
  test::TraceBuilder recovered;
  recovered.start()
      .event(test::driver_alloc(0, 0xA000, 4 * kMiB, 1'000))
      .end(1, 500, proto::TraceEnd::SIGNAL, 11)
      .event(test::driver_alloc(0, 0xB000, 2 * kMiB, 700))  // 700 ns after the end record
      .end_chunk();
  std::string path = test::temp_path("analysis-survived-signal.mtrace");
  test::write_file(path, recovered.bytes());
  auto a = analyze_trace(path, true);
  EXPECT_FALSE(a->info.end.has_value());
  EXPECT_EQ(a->model.health().events, 2u);
  EXPECT_EQ(a->last_event_time_ns, 2'200);  // 1000 + 500 + 700: deltas chain through the end record
  // The same without the live-at-peak capture (analysis.cc replays through another sink then).
  a = analyze_trace(path, false);
  EXPECT_FALSE(a->info.end.has_value());
  EXPECT_EQ(a->last_event_time_ns, 2'200);

  test::TraceBuilder then_exited = recovered;
  then_exited.end(2, 100, proto::TraceEnd::EXIT).end_chunk();
  test::write_file(path, then_exited.bytes());
  for (bool with_live_at_peak : {true, false}) {
    a = analyze_trace(path, with_live_at_peak);
    ASSERT_TRUE(a->info.end.has_value());
    EXPECT_EQ(a->info.end->how(), proto::TraceEnd::EXIT);
    EXPECT_EQ(a->last_event_time_ns, 2'200);  // the last event's; the end record's 100 ns come after it
    EXPECT_EQ(a->duration_ns(), 2'300);
  }

  // Two end records with no event between them: the second one counts, the last event's time stays.
  test::TraceBuilder two_ends = recovered;
  two_ends.end(2, 100, proto::TraceEnd::SIGNAL, 11).end(2, 50, proto::TraceEnd::EXIT).end_chunk();
  test::write_file(path, two_ends.bytes());
  a = analyze_trace(path, true);
  ASSERT_TRUE(a->info.end.has_value());
  EXPECT_EQ(a->info.end->how(), proto::TraceEnd::EXIT);
  EXPECT_EQ(a->last_event_time_ns, 2'200);
  EXPECT_EQ(a->duration_ns(), 2'350);  // 2,200 + 100 + 50
  std::remove(path.c_str());
}

// An NvmlProcesses record (proto/memtrace.proto) of `device` listing `pids` (each with 1 MiB).
proto::Record nvml_processes(uint32_t device, const std::vector<uint32_t>& pids) {
  proto::Record r;
  proto::NvmlProcesses* list = r.mutable_nvml_processes();
  list->set_device(device);
  for (uint32_t pid : pids) {
    proto::NvmlProcess* p = list->add_processes();
    p->set_pid(pid);
    p->set_used_bytes(kMiB);
  }
  return r;
}

TEST(Analysis, NvmlOtherPidsAreEveryPidListedPerDeviceAscending) {
  test::TraceBuilder b;
  b.start().event(test::driver_alloc(0, 0x1000, kMiB));
  b.record(nvml_processes(0, {17, 4242}));
  b.record(nvml_processes(1, {99}));
  b.record(nvml_processes(0, {5}));     // 17 and 4242 left, 5 came: all three were there during the trace
  b.record(nvml_processes(1, {}));      // everyone left device 1: 99 was still listed
  b.record(nvml_processes(2, {}));      // an empty list of a device never listed: nothing to keep
  b.record(nvml_processes(0, {4242}));  // listed again: once
  b.end(1, 0).end_chunk();
  const std::string path = test::temp_path("analysis-nvml-pids.mtrace");
  test::write_file(path, b.bytes());
  auto a = analyze_trace(path, false);
  const std::map<uint32_t, std::set<uint32_t>> expected = {{0, {5, 17, 4242}}, {1, {99}}};
  EXPECT_EQ(a->info.nvml_other_pids, expected);
}

TEST(Analysis, NvmlOtherPidsKeepTheLowestWhenTooMany) {
  // 1,030 pids, highest first, over two records: the lowest 1,024 (1 .. 1,024) are kept.
  std::vector<uint32_t> first, second;
  for (uint32_t pid = 1030; pid > 515; pid--) first.push_back(pid);
  for (uint32_t pid = 515; pid >= 1; pid--) second.push_back(pid);
  test::TraceBuilder b;
  b.start().record(nvml_processes(3, first)).record(nvml_processes(3, second)).end_chunk();
  const std::string path = test::temp_path("analysis-nvml-pids-bound.mtrace");
  test::write_file(path, b.bytes());
  auto a = analyze_trace(path, false);
  const std::set<uint32_t>& pids = a->info.nvml_other_pids.at(3);
  ASSERT_EQ(pids.size(), kMaxNvmlOtherPidsKept);
  EXPECT_EQ(*pids.begin(), 1u);
  EXPECT_EQ(*pids.rbegin(), 1024u);
}

}  // namespace
}  // namespace memtrace
