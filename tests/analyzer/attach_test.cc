// Traces that began by attach: the live set at attach (LiveAtAttach) in the model's totals, frees of it matched,
// the blocks_unknown aggregate, the AttachBaseline's reserved total and its check, and what the reports say.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/peak_breakdown.h"
#include "attach_traces.h"
#include "fleet/process_summary.h"
#include "model/replay.h"
#include "stacks/frames.h"
#include "stacks/symbolizer.h"

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
  EXPECT_TRUE(d.peak_allocated().at_attach);  // before e0, not after it
  EXPECT_EQ(d.peak_reserved().bytes, 8 * kMiB);
  EXPECT_EQ(d.peak_reserved().time_ns, 0);
  EXPECT_TRUE(d.peak_reserved().at_attach);
  // The trace's own allocations: C; A and B are counted apart, and so is A's free.
  EXPECT_EQ(d.block_allocations, 1u);
  EXPECT_EQ(d.block_frees, 0u);
  EXPECT_EQ(d.driver_allocations, 0u);
  const AttachFacts& facts = a->model.attach_facts().at(0);
  EXPECT_EQ(facts.block_allocations, 2u);
  EXPECT_EQ(facts.block_bytes, 3 * kMiB);
  EXPECT_EQ(facts.block_frees, 1u);  // A
  EXPECT_EQ(facts.driver_allocations, 1u);
  EXPECT_EQ(facts.driver_bytes, 8 * kMiB);
  EXPECT_EQ(facts.driver_frees, 0u);
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
  EXPECT_EQ(a->model.attach_facts().at(0).block_frees, 0u);  // the aggregate's frees are counted in health
  EXPECT_EQ(d.block_allocations, 1u);                        // D
  EXPECT_EQ(d.block_frees, 0u);
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
  // {allocated, reserved, driver} at attach (A and the baseline: one change, not one per record), after e0.
  EXPECT_EQ(seen, (std::vector<DeviceTotals>{{kMiB, 8 * kMiB, 0}, {2 * kMiB, 6 * kMiB, 0}}));
  EXPECT_EQ(model.devices().at(0).peak_reserved().bytes, 8 * kMiB);
  EXPECT_EQ(model.devices().at(0).peak_reserved().time_ns, 0);
}

TEST(Attach, ADormantTracersReservedAtAttachIsPyTorchsSegments) {
  // A dormant tracer's baseline has no PyTorch totals. Its live set lists a 512 KiB block before the 2 MiB segment
  // it lies in, and a 2 MiB segment with no live block (not known to be PyTorch's). Reserved at attach: the first
  // segment, 2 MiB; driver 4 MiB. PyTorch's first report after attach says allocated 1 MiB, reserved 2 MiB.
  test::TraceBuilder b(3);
  b.attach_start(proto::TraceStart::ATTACH_DORMANT, 1, true, true);
  b.torch_block_at_attach(0, 0x10001000, 512 * 1024);
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x10000000, 2 * kMiB);
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x20000000, 2 * kMiB);
  b.attach_baseline(0, 0, 0);
  b.event(test::torch_event(proto::ALLOC, 0, 0x10081000, 512 * 1024, kMiB, 2 * kMiB, 1'000'000)).end_chunk();
  std::string path = test::temp_path("attach-dormant-reserved.mtrace");
  test::write_file(path, b.bytes());
  std::vector<DeviceTotals> seen;
  MemoryModel model;
  model.set_totals_callback([&](int32_t, int64_t, const DeviceTotals& t) { seen.push_back(t); });
  read_trace(path, SinkOf{[&](const EventFields& e) { model.apply(e); },
                          [&](const proto::Record& r) { model.apply_attach_record(r); }});
  // {allocated, reserved, driver} at attach, after e0.
  EXPECT_EQ(seen, (std::vector<DeviceTotals>{{512 * 1024, 2 * kMiB, 4 * kMiB}, {kMiB, 2 * kMiB, 4 * kMiB}}));
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

// The breakdown at device 0's peak allocated, replayed (what `memtrace peak` shows).
MomentBreakdown replayed_peak(const Analysis& a) {
  Symbolizer symbolizer(a.stacks.modules(), std::vector<std::string>{});
  FrameResolver resolver(a.stacks, symbolizer);
  Moment moment = moment_of_peak(0, a.model.devices().at(0).peak_allocated());
  return break_down_moments(a, std::span(&moment, 1), EventPhases{}, resolver).at(0);
}

// A peak the live set at attach reached is the moment before the first event (which frees A), not after it; a
// snapshot without events has its moment at the end of the replay.
TEST(Attach, APeakAtAttachIsBrokenDownBeforeTheFirstEvent) {
  auto a = analyze("attach-peak-breakdown.mtrace", test::attached_torch_trace());
  MomentBreakdown b = replayed_peak(*a);
  EXPECT_EQ(b.totals.allocated_bytes, 3 * kMiB);  // A + B
  EXPECT_EQ(b.live.size(), 2u);
  auto s = analyze("attach-peak-breakdown-snapshot.mtrace", test::snapshot_trace());
  MomentBreakdown sb = replayed_peak(*s);
  EXPECT_EQ(sb.totals.allocated_bytes, 2 * kMiB);
  EXPECT_EQ(sb.live.size(), 2u);
}

// What `summary` replays where its one pass did not capture a peak (collect_live_at_peak): a peak reached at attach
// is read before the first event (which frees A), with the fragmentation there; a snapshot's, after the last record.
TEST(Attach, TheReplayedLiveAtAPeakAtAttachIsBeforeTheFirstEvent) {
  std::string path = test::temp_path("attach-replayed-peak.mtrace");
  test::write_file(path, test::attached_torch_trace().bytes());
  auto a = analyze_trace(path, /*with_live_at_peak=*/false);
  collect_live_at_peak(*a, {0}, SiteGrouping(a->stacks));
  ASSERT_EQ(a->live_at_peak.at(0).size(), 1u);
  EXPECT_EQ(a->live_at_peak.at(0)[0].stack_id, 0u);
  EXPECT_EQ(a->live_at_peak.at(0)[0].bytes, 3 * kMiB);  // A + B; after e0, B alone
  EXPECT_EQ(a->live_at_peak.at(0)[0].count, 2u);
  const Fragmentation& f = a->fragmentation_at_peak.at(0);
  EXPECT_EQ(f.reserved_minus_allocated_bytes, 5 * kMiB);  // the baseline's 8 MiB - 3 MiB
  EXPECT_EQ(f.segment_count, 1u);                         // S
  EXPECT_EQ(f.largest_free_block_bytes, 5 * kMiB);        // S's tail after B (after e0, still 5 MiB: A's 1 MiB gap)

  test::write_file(path, test::snapshot_trace().bytes());
  auto s = analyze_trace(path, false);
  collect_live_at_peak(*s, {0, 1}, SiteGrouping(s->stacks));
  ASSERT_EQ(s->live_at_peak.at(0).size(), 1u);
  EXPECT_EQ(s->live_at_peak.at(0)[0].bytes, 2 * kMiB);
  EXPECT_EQ(s->live_at_peak.at(0)[0].count, 2u);
  ASSERT_EQ(s->live_at_peak.at(1).size(), 1u);
  EXPECT_EQ(s->live_at_peak.at(1)[0].bytes, 6 * kMiB);
  EXPECT_EQ(s->live_at_peak.at(1)[0].count, 1u);
}

// replay_to_moments: a moment at attach is the state before its event, after every attach record; the moment after
// the same event follows it; one at attach with no event after it comes after the last record.
TEST(Attach, MomentsAtAttachComeBeforeTheirEvent) {
  std::string path = test::temp_path("attach-moments.mtrace");
  test::write_file(path, test::attached_torch_trace().bytes());
  MemoryModel model;
  std::vector<std::pair<uint64_t, DeviceTotals>> seen;  // (events applied, totals of device 0)
  auto note = [&](ReplayMoment) { seen.emplace_back(model.next_event_index(), model.totals(0)); };
  const std::vector<ReplayMoment> moments = {{0, false}, {0, true}, {1, false}};
  ReplayOutcome outcome = replay_to_moments(path, {{0, LayerHint{true, true}}}, model, moments, note);
  EXPECT_TRUE(outcome.stopped);
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, DeviceTotals>>{{0, {3 * kMiB, 8 * kMiB, 8 * kMiB}},
                                                                  {1, {2 * kMiB, 8 * kMiB, 8 * kMiB}},
                                                                  {2, {3 * kMiB, 8 * kMiB, 8 * kMiB}}}));
  test::write_file(path, test::snapshot_trace().bytes());
  MemoryModel snapshot;
  seen.clear();
  const std::vector<ReplayMoment> at_attach = {{0, true}};
  outcome = replay_to_moments(path, {}, snapshot, at_attach, [&](ReplayMoment) {
    seen.emplace_back(snapshot.next_event_index(), snapshot.totals(0));
  });
  EXPECT_FALSE(outcome.stopped);
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, DeviceTotals>>{{0, {2 * kMiB, 4 * kMiB, 4 * kMiB}}}));
}

// `memtrace CMD TRACE` of a trace builder's bytes, expecting exit status 0.
std::string memtrace_on(const std::string& command, const std::string& name, const test::TraceBuilder& b) {
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  test::MemtraceRun r = test::run_memtrace_binary(command + " " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(AttachText, SummarySaysHowTheTraceBeganAndEnded) {
  std::string out = memtrace_on("summary", "attach-summary.mtrace", test::attached_torch_trace());
  EXPECT_TRUE(
      has_line(out,
               "  Attached to the running process at 2026-12-02 15:04:05.000 UTC (attach 2; tracer: loaded into "
               "the process; layers: driver and PyTorch): 2 allocations, 3.00 MiB (3,145,728 B) allocated "
               "before attach; driver 1 allocation, 8.00 MiB (8,388,608 B)"))
      << out;
  EXPECT_NE(out.find("  events read 2, complete, detached (the process ran on), last event at 0.002 s"),
            std::string::npos)
      << out;
  EXPECT_TRUE(has_line(out, "  unknown frees 0, double frees 0, allocations at a live address 0, failed allocations 0"))
      << out;
  EXPECT_TRUE(has_line(out, "      (no stack: allocated before attach, or recorded without a stack)")) << out;
  EXPECT_EQ(out.find("ALLOCATED AT ATTACH"), std::string::npos) << out;
  // C is the trace's one allocation; A, B and S are counted apart, A's free with them.
  EXPECT_TRUE(has_line(out,
                       "  driver allocations 0 (0 freed), block allocations 1 (0 freed); live at attach: driver 1 "
                       "(0 freed), block 2 (1 freed)"))
      << out;
}

// `peak` names what was live at attach as `summary` does: A and B, at the peak (attach), have no stack.
TEST(AttachText, PeakNamesTheLiveSetAtAttach) {
  std::string out = memtrace_on("peak", "attach-peak.mtrace", test::attached_torch_trace());
  EXPECT_TRUE(has_line(out,
                       "      #1.1 3.00 MiB (3,145,728 B) in 2 allocations: (no stack: allocated before attach, or "
                       "recorded without a stack)"))
      << out;
}

// One row at time 0 holds what was live at attach, all of it, with the baseline's reserved (not a row per record,
// the first with reserved 0); then one per event. Fragmentation: S (8 MiB) holds A [0, 1 MiB) and B [1, 3 MiB),
// then B, then B and C [3, 4 MiB).
TEST(AttachText, TheTimelineStartsWithOneRowAtAttach) {
  std::string csv = memtrace_on("timeline --csv", "attach-timeline.mtrace", test::attached_torch_trace());
  EXPECT_EQ(csv,
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes\n"
            "0.000000000,0,3145728,8388608,8388608,5242880,1,5242880\n"
            "0.001000000,0,2097152,8388608,8388608,6291456,1,5242880\n"
            "0.002000000,0,3145728,8388608,8388608,5242880,1,4194304\n");
  nlohmann::json j = nlohmann::json::parse(
      memtrace_on("timeline --json", "attach-timeline-json.mtrace", test::attached_torch_trace()));
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["time_s"], 0.0);
  EXPECT_EQ(j["rows"][0]["allocated_bytes"], 3 * kMiB);
  EXPECT_EQ(j["rows"][0]["reserved_bytes"], 8 * kMiB);
  // A snapshot: one row per device, at time 0; device 1 has no PyTorch blocks, so no segments.
  EXPECT_EQ(memtrace_on("timeline --csv", "attach-timeline-snapshot.mtrace", test::snapshot_trace()),
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes\n"
            "0.000000000,0,2097152,4194304,4194304,2097152,1,2097152\n"
            "0.000000000,1,6291456,6291456,6291456,0,,\n");
}

TEST(AttachText, LeaksListWhatWasAllocatedBeforeAttachApart) {
  std::string out = memtrace_on("leaks", "attach-leaks.mtrace", test::attached_torch_trace());
  EXPECT_TRUE(has_line(out, "Live at exit (leak candidates, at end of trace): 1 call site")) << out;
  EXPECT_TRUE(has_line(
      out, "    device 0, PyTorch blocks: allocated before attach, still live: 1 allocation, 2.00 MiB (2,097,152 B)"))
      << out;
  EXPECT_TRUE(has_line(out, "    #1 device 0: 1.00 MiB (1,048,576 B) in 1 allocation")) << out;
}

TEST(AttachText, TheBaselineMismatchIsOneHealthLine) {
  std::string out = memtrace_on("summary", "attach-mismatch-text.mtrace", test::attached_torch_trace(5 * kMiB));
  EXPECT_TRUE(has_line(out,
                       "  ALLOCATED AT ATTACH DIFFERS FROM PYTORCH'S OWN TOTAL, device 0: memtrace 3.00 MiB "
                       "(3,145,728 B), PyTorch 5.00 MiB (5,242,880 B)"))
      << out;
}

TEST(AttachText, UnlistedBlocksAndADormantTracer) {
  std::string out = memtrace_on("summary", "attach-unlisted-text.mtrace", test::attached_unlisted_blocks_trace());
  EXPECT_TRUE(has_line(out,
                       "  Attached to the running process at 2026-12-02 15:04:05.000 UTC (attach 1; tracer: dormant): "
                       "0 allocations, 3.00 MiB (3,145,728 B) allocated before attach (3.00 MiB (3,145,728 B) of it in "
                       "blocks not listed one by one)"))
      << out;
  EXPECT_TRUE(has_line(out, "  unknown frees 1, double frees 0, allocations at a live address 0, failed allocations 0"))
      << out;
  EXPECT_TRUE(has_line(out,
                       "  frees of blocks allocated before attach whose addresses were not listed 3 (taken from their "
                       "total, not unknown)"))
      << out;
  EXPECT_TRUE(has_line(out, "  driver allocations 0 (0 freed), block allocations 1 (0 freed)")) << out;  // D
}

TEST(AttachText, ASnapshotReadsAsTheLiveSet) {
  std::string out = memtrace_on("summary", "attach-snapshot-text.mtrace", test::snapshot_trace());
  EXPECT_TRUE(has_line(out,
                       "  Snapshot of the running process's live set at 2026-12-02 15:04:05.000 UTC: 2 allocations, "
                       "2.00 MiB (2,097,152 B) live (the peaks are this live set); driver 2 allocations, 10.00 MiB "
                       "(10,485,760 B)"))
      << out;
  EXPECT_TRUE(has_line(out, "  peak allocated 2.00 MiB (2,097,152 B) at 0.000 s (event 0)")) << out;
  EXPECT_TRUE(has_line(out,
                       "    device 1, driver: allocated before attach, still live: 1 allocation, 6.00 MiB "
                       "(6,291,456 B)"))
      << out;
  EXPECT_NE(out.find("snapshot written (the process ran on)"), std::string::npos) << out;
  EXPECT_TRUE(has_line(out,
                       "  driver allocations 0 (0 freed), block allocations 0 (0 freed); live at attach: driver 1 "
                       "(0 freed), block 2 (0 freed)"))
      << out;
}

TEST(AttachText, PyTorchOnlyWhereCuptiWasBusy) {
  test::TraceBuilder b(3);
  b.attach_start(proto::TraceStart::ATTACH_INJECTED, 3, /*driver_layer_attached=*/false, true, 1'000'000'000,
                 test::kAttachUnixNs);
  b.notice(proto::Notice::CUPTI_BUSY, "CUPTI already has a subscriber (Kineto?)");
  b.torch_block_at_attach(0, 0x10000000, kMiB).end(0, 0, proto::TraceEnd::DETACH).end_chunk();
  std::string out = memtrace_on("summary", "attach-cupti-busy.mtrace", b);
  EXPECT_TRUE(
      has_line(out,
               "  Attached to the running process at 2026-12-02 15:04:05.000 UTC (attach 3; tracer: loaded into "
               "the process; layers: PyTorch only: CUPTI was busy): 1 allocation, 1.00 MiB (1,048,576 B) "
               "allocated before attach"))
      << out;
}

TEST(AttachJson, TheAttachObject) {
  nlohmann::json j =
      nlohmann::json::parse(memtrace_on("summary --json", "attach-json.mtrace", test::attached_torch_trace()));
  const nlohmann::json& attach = j["trace"]["attach"];
  EXPECT_EQ(attach["origin"], "ATTACH_INJECTED");
  EXPECT_EQ(attach["attach_number"], 2);
  EXPECT_EQ(attach["driver_layer_attached"], true);
  EXPECT_EQ(attach["torch_layer_attached"], true);
  ASSERT_EQ(attach["devices"].size(), 1u);
  const nlohmann::json& d = attach["devices"][0];
  EXPECT_EQ(d["device"], 0);
  EXPECT_EQ(d["block_allocations"], 2);
  EXPECT_EQ(d["block_bytes"], 3 * kMiB);
  EXPECT_EQ(d["driver_allocations"], 1);
  EXPECT_EQ(d["driver_bytes"], 8 * kMiB);
  EXPECT_EQ(d["block_frees"], 1);  // A
  EXPECT_EQ(d["driver_frees"], 0);
  EXPECT_EQ(d["unlisted_block_bytes"], 0);
  EXPECT_EQ(d["baseline"]["allocator_allocated_bytes"], 3 * kMiB);
  EXPECT_EQ(d["baseline"]["allocator_reserved_bytes"], 8 * kMiB);
  EXPECT_EQ(d["baseline"]["device_free_bytes"], 70 * kMiB);
  EXPECT_EQ(d["baseline"]["process_used_bytes"], nullptr);
  EXPECT_EQ(attach["still_live_at_exit"],
            nlohmann::json::parse(
                R"([{"device":0,"layer":"block","allocations":1,"bytes":2097152,"unlisted_bytes":0}])"));
  EXPECT_FALSE(attach.contains("allocated_vs_baseline"));
  EXPECT_EQ(j["trace"]["end"]["how"], "DETACH");
  EXPECT_EQ(j["trace"]["unknown_frees"], 0);
  // The device's counts are the trace's own allocations: C.
  EXPECT_EQ(j["devices"][0]["block_allocations"], 1);
  EXPECT_EQ(j["devices"][0]["block_frees"], 0);
  EXPECT_EQ(j["devices"][0]["driver_allocations"], 0);
  // A trace from launch has no attach object.
  nlohmann::json launch =
      nlohmann::json::parse(memtrace_on("summary --json", "attach-json-launch.mtrace", test::small_torch_trace()));
  EXPECT_FALSE(launch["trace"].contains("attach"));
}

// One process's summary for the many-process views (fleet/process_summary.h) says its trace began at an attach: when,
// which attach, and what was allocated before it (the blocks, listed or not); JSON both ways, and a summary file
// written before the key existed reads as a trace from launch.
TEST(AttachFleet, AProcessSummarySaysItBeganAtAnAttach) {
  auto summarize = [](const std::string& name, const test::TraceBuilder& b) {
    std::string path = test::temp_path(name);
    test::write_file(path, b.bytes());
    auto a = analyze_trace(path, false);
    Symbolizer symbolizer(a->stacks.modules(), std::vector<std::string>{});
    FrameResolver resolver(a->stacks, symbolizer);
    return summarize_process(*a, resolver, 10);
  };
  ProcessSummary p = summarize("attach-fleet-summary.mtrace", test::attached_torch_trace());
  ASSERT_TRUE(p.attach);
  EXPECT_EQ(*p.attach, (ProcessAttach{"ATTACH_INJECTED", 2, test::kAttachUnixNs, 2, 3 * kMiB, 0}));
  EXPECT_EQ(p.devices.at(0).allocations, 1u);  // C: the trace's own
  nlohmann::json j = process_summary_json(p);
  EXPECT_EQ(j["attach"], nlohmann::json::parse(R"({"origin": "ATTACH_INJECTED", "attach_number": 2,
      "unix_ns": 1796223845000000000, "allocations": 2, "bytes": 3145728, "unlisted_bytes": 0})"));
  EXPECT_EQ(process_summary_from_json(j), p);
  j.erase("attach");
  EXPECT_FALSE(process_summary_from_json(j).attach);
  ProcessSummary u = summarize("attach-fleet-unlisted.mtrace", test::attached_unlisted_blocks_trace());
  EXPECT_EQ(*u.attach, (ProcessAttach{"ATTACH_DORMANT", 1, test::kAttachUnixNs, 0, 3 * kMiB, 3 * kMiB}));
  EXPECT_FALSE(summarize("attach-fleet-launch.mtrace", test::small_torch_trace()).attach);
}

// `memtrace summary A B`: the process tree's line of an attached process says so, and `--json` has the object.
// The launched process (pid 4242 too, started 1 s before the attach) is time 0.
TEST(AttachFleet, TheManyProcessSummarySaysWhichBeganAtAnAttach) {
  test::TraceBuilder launched;
  launched.start(1'000'000'000, test::kAttachUnixNs - 1'000'000'000);
  launched.event(test::driver_alloc(0, 0x1000, kMiB, 1'000'000)).end(1, 0).end_chunk();
  const std::string first = test::temp_path("attach-fleet-launched.mtrace");
  const std::string second = test::temp_path("attach-fleet-attached.mtrace");
  test::write_file(first, launched.bytes());
  test::write_file(second, test::attached_torch_trace().bytes());
  test::MemtraceRun r = test::run_memtrace_binary("summary " + first + " " + second);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[" + second +
                       "] (began at attach 2, +1.000 s: 2 allocations, 3.00 MiB (3,145,728 B) allocated before "
                       "attach)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[" + first + "]\n"), std::string::npos) << r.out;
  r = test::run_memtrace_binary("summary --json " + first + " " + second);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["processes"].size(), 2u);
  EXPECT_TRUE(j["processes"][0]["attach"].is_null());
  EXPECT_EQ(j["processes"][1]["attach"]["attach_number"], 2);
  EXPECT_EQ(j["processes"][1]["attach"]["bytes"], 3 * kMiB);
}

// Values no tracer writes: sizes near 2^64 saturate, ordinals outside -1..1023 are counted and not applied, and a
// LiveAtAttach after an Event is accepted as live from its place in the file and counted; never a crash.
TEST(AttachHostile, HugeSizesBadDevicesAndLateRecords) {
  test::TraceBuilder b(3);
  b.attach_start(proto::TraceStart::ATTACH_DORMANT, 1, true, true);
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x1000, UINT64_MAX - 1);
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x2000, UINT64_MAX - 1);
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 5000, 0x3000, 4096);
  b.live_at_attach(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0, UINT64_MAX, /*blocks_unknown=*/true);
  b.attach_baseline(-7, 0, 0, 1, 1);
  b.event(test::driver_free(0, 0x1000, 1'000'000));
  b.torch_block_at_attach(0, 0x9000, 4096);                                   // after the first Event
  b.event(test::torch_event(proto::FREE, 0, 0x77000, 100, 0, 0, 1'000'000));  // taken from the aggregate
  b.end_chunk();
  std::string path = test::temp_path("attach-hostile.mtrace");
  test::write_file(path, b.bytes());
  auto a = analyze_trace(path, true);
  const TraceHealth h = a->model.health();
  EXPECT_EQ(h.attach_records_with_bad_device, 2u);
  EXPECT_EQ(h.live_at_attach_after_events, 1u);
  EXPECT_EQ(h.implausible_sizes, 3u);  // the two sizes of 2^64 - 2 and the aggregate's
  EXPECT_EQ(h.unknown_frees, 0u);
  EXPECT_EQ(h.frees_of_unlisted_before_attach, 1u);
  const DeviceState& d = a->model.devices().at(0);
  EXPECT_EQ(d.driver_layer_bytes, 1u);               // saturated at 2^64 - 1, less one 2^64 - 2
  EXPECT_EQ(d.torch_block_bytes, UINT64_MAX - 100);  // saturated at 2^64 - 1 (+ 4096), less the free's 100
  EXPECT_EQ(a->model.attach_facts().count(5000), 0u);
  test::MemtraceRun r = test::run_memtrace_binary("summary " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has_line(r.out,
                       "  allocations live at attach listed after the first event (live from their place in "
                       "the file) 1"))
      << r.out;
  EXPECT_TRUE(has_line(r.out, "  attach records of a device ordinal outside -1..1023 (not applied) 2")) << r.out;
  r = test::run_memtrace_binary("summary --json " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace memtrace
