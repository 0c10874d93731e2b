// Traces that began by attach: the live set at attach (LiveAtAttach) in the model's totals, frees of it matched,
// the blocks_unknown aggregate, the AttachBaseline's reserved total and its check, and what the reports say.
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "attach_traces.h"

namespace memtrace {
namespace {

using test::kMiB;

std::unique_ptr<Analysis> analyze(const std::string& name, const test::TraceBuilder& b) {
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  return analyze_trace(path, true);
}

TEST(Attach, APreAttachBlockFreedAfterAttachIsMatched) {
  auto a = analyze("attach-freed.mtrace", test::attached_torch_trace());
  const TraceHealth h = a->model.health();
  EXPECT_EQ(h.events, 2u);
  EXPECT_EQ(h.unknown_frees, 0u);
  EXPECT_EQ(h.double_frees, 0u);
  EXPECT_EQ(h.allocated_vs_pytorch.events, 0u);
  EXPECT_EQ(h.allocated_vs_attach_baseline.events, 0u);
  const DeviceState& d = a->model.devices().at(0);
  EXPECT_EQ(d.totals(), (DeviceTotals{3 * kMiB, 8 * kMiB, 8 * kMiB}));  // B + C; PyTorch's 8 MiB; segment S
  EXPECT_EQ(d.peak_allocated().bytes, 3 * kMiB);
  EXPECT_EQ(d.peak_allocated().time_ns, 0);  // the live set at attach: A + B
  EXPECT_EQ(d.peak_allocated().event_index, 0u);
  EXPECT_EQ(d.peak_reserved().bytes, 8 * kMiB);
  EXPECT_EQ(d.peak_reserved().time_ns, 0);
  EXPECT_EQ(d.block_allocations, 3u);  // A and B at attach, C after
  EXPECT_EQ(d.block_frees, 1u);
  const AttachFacts& facts = a->model.attach_facts().at(0);
  EXPECT_EQ(facts.block_allocations, 2u);
  EXPECT_EQ(facts.block_bytes, 3 * kMiB);
  EXPECT_EQ(facts.driver_allocations, 1u);
  EXPECT_EQ(facts.driver_bytes, 8 * kMiB);
  EXPECT_EQ(facts.unlisted_bytes, 0u);
  // At the peak (attach): A and B, with no stack.
  ASSERT_EQ(a->live_at_peak.at(0).size(), 1u);
  EXPECT_EQ(a->live_at_peak.at(0)[0].stack_id, 0u);
  EXPECT_EQ(a->live_at_peak.at(0)[0].bytes, 3 * kMiB);
  EXPECT_EQ(a->live_at_peak.at(0)[0].count, 2u);
  // Live at the end: C is a leak site of stack 10; B is listed apart.
  ASSERT_EQ(a->leaks.size(), 1u);
  EXPECT_EQ(a->leaks[0].site.stack_id, 10u);
  EXPECT_EQ(a->leaks[0].site.bytes, kMiB);
  const auto& before = a->model.before_attach_live_at_exit();
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].device, 0);
  EXPECT_EQ(before[0].layer, proto::LAYER_BLOCK);
  EXPECT_EQ(before[0].allocations, 1u);
  EXPECT_EQ(before[0].bytes, 2 * kMiB);
  EXPECT_EQ(before[0].unlisted_bytes, 0u);
  ASSERT_TRUE(a->info.end);
  EXPECT_EQ(a->info.end->how(), proto::TraceEnd::DETACH);
  EXPECT_EQ(a->duration_ns(), 3'000'000);
}

TEST(Attach, TheUnlistedAggregateAbsorbsFreesUpToItsSize) {
  auto a = analyze("attach-unlisted.mtrace", test::attached_unlisted_blocks_trace());
  const TraceHealth h = a->model.health();
  EXPECT_EQ(h.frees_of_unlisted_before_attach, 3u);
  EXPECT_EQ(h.unknown_frees, 1u);
  EXPECT_EQ(h.allocated_vs_pytorch.events, 0u);
  EXPECT_EQ(h.allocated_vs_attach_baseline.events, 0u);  // the aggregate's 3 MiB are PyTorch's 3 MiB
  const DeviceState& d = a->model.devices().at(0);
  EXPECT_EQ(d.torch_block_bytes, kMiB / 2);  // 3 MiB - 3 x 1 MiB + D
  EXPECT_EQ(d.totals(), (DeviceTotals{kMiB / 2, 4 * kMiB, 0}));
  EXPECT_EQ(d.peak_allocated().bytes, 3 * kMiB);
  EXPECT_EQ(a->model.attach_facts().at(0).unlisted_bytes, 3 * kMiB);
  EXPECT_EQ(a->model.attach_facts().at(0).block_allocations, 0u);
  EXPECT_TRUE(a->model.before_attach_live_at_exit().empty());  // all three unlisted MiB were freed
}

TEST(Attach, ReservedComesFromTheBaselineBeforePyTorchsFirstReport) {
  // PyTorch layer only (CUPTI was busy): no driver segment is known, so without the baseline reserved would be the
  // driver total, 0. Reserved 8 MiB at attach (baseline), 6 MiB at PyTorch's first report after it.
  test::TraceBuilder b(3);
  b.attach_start(proto::TraceStart::ATTACH_INJECTED, 1, /*driver_layer_attached=*/false, true);
  b.notice(proto::Notice::CUPTI_BUSY, "CUPTI already has a subscriber");
  b.torch_block_at_attach(0, 0x10000000, kMiB);
  b.attach_baseline(0, 0, 0, kMiB, 8 * kMiB);
  b.event(test::torch_event(proto::ALLOC, 0, 0x10100000, kMiB, 2 * kMiB, 6 * kMiB, 1'000'000)).end_chunk();
  std::string path = test::temp_path("attach-reserved.mtrace");
  test::write_file(path, b.bytes());
  std::vector<DeviceTotals> seen;
  MemoryModel model;
  model.set_totals_callback([&](int32_t, int64_t, const DeviceTotals& t) { seen.push_back(t); });
  read_trace(path, SinkOf{[&](const EventFields& e) { model.apply(e); },
                          [&](const proto::Record& r) { model.apply_attach_record(r); }});
  // {allocated, reserved, driver} after A, after the baseline, after e0.
  EXPECT_EQ(seen, (std::vector<DeviceTotals>{{kMiB, 0, 0}, {kMiB, 8 * kMiB, 0}, {2 * kMiB, 6 * kMiB, 0}}));
  EXPECT_EQ(model.devices().at(0).peak_reserved().bytes, 8 * kMiB);
  EXPECT_EQ(model.devices().at(0).peak_reserved().time_ns, 0);
}

TEST(Attach, AllocatedAtAttachThatDiffersFromTheBaselineIsOneHealthFigure) {
  auto a = analyze("attach-mismatch.mtrace", test::attached_torch_trace(5 * kMiB));
  const FigureMismatch& m = a->model.health().allocated_vs_attach_baseline;
  EXPECT_EQ(m.events, 1u);
  EXPECT_EQ(m.device, 0);
  EXPECT_EQ(m.replay_bytes, 3 * kMiB);
  EXPECT_EQ(m.trace_bytes, 5 * kMiB);
  EXPECT_EQ(m.time_ns, 0);
}

TEST(Attach, ASnapshotIsItsLiveSet) {
  auto a = analyze("attach-snapshot.mtrace", test::snapshot_trace());
  EXPECT_EQ(a->model.health().events, 0u);
  const DeviceState& d0 = a->model.devices().at(0);
  EXPECT_EQ(d0.totals(), (DeviceTotals{2 * kMiB, 4 * kMiB, 4 * kMiB}));
  EXPECT_EQ(d0.peak_allocated().bytes, 2 * kMiB);
  EXPECT_EQ(d0.peak_reserved().bytes, 4 * kMiB);
  const DeviceState& d1 = a->model.devices().at(1);
  EXPECT_EQ(d1.totals(), (DeviceTotals{6 * kMiB, 6 * kMiB, 6 * kMiB}));
  EXPECT_EQ(d1.peak_allocated().bytes, 6 * kMiB);
  // The peak's live set, taken with no event after it.
  ASSERT_EQ(a->live_at_peak.at(0).size(), 1u);
  EXPECT_EQ(a->live_at_peak.at(0)[0].bytes, 2 * kMiB);
  ASSERT_EQ(a->live_at_peak.at(1).size(), 1u);
  EXPECT_EQ(a->live_at_peak.at(1)[0].bytes, 6 * kMiB);
  EXPECT_TRUE(a->leaks.empty());
  const auto& before = a->model.before_attach_live_at_exit();
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0].device, 0);
  EXPECT_EQ(before[0].layer, proto::LAYER_BLOCK);
  EXPECT_EQ(before[0].allocations, 2u);
  EXPECT_EQ(before[0].bytes, 2 * kMiB);
  EXPECT_EQ(before[1].device, 1);
  EXPECT_EQ(before[1].layer, proto::LAYER_DRIVER);
  EXPECT_EQ(before[1].bytes, 6 * kMiB);
  EXPECT_EQ(a->info.end->how(), proto::TraceEnd::SNAPSHOT_DONE);
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

TEST(AttachDemo, Print) {
  const char* dir = std::getenv("ATTACH_DEMO_DIR");
  if (!dir) GTEST_SKIP();
  test::write_file(std::string(dir) + "/torch.mtrace", test::attached_torch_trace().bytes());
  test::write_file(std::string(dir) + "/mismatch.mtrace", test::attached_torch_trace(5 * test::kMiB).bytes());
  test::write_file(std::string(dir) + "/unlisted.mtrace", test::attached_unlisted_blocks_trace().bytes());
  test::write_file(std::string(dir) + "/snapshot.mtrace", test::snapshot_trace().bytes());
}

}  // namespace
}  // namespace memtrace
