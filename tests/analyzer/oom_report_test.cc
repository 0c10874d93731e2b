// `memtrace oom`'s facts and diagnosis: each cause triggered alone by a small hand-made trace, with the
// figures worked out in the comments; folding of driver failures; the bound on detailed OOMs.
#include <gtest/gtest.h>

#include "analysis/analysis.h"
#include "analysis/oom_diagnosis.h"
#include "analysis/oom_report.h"
#include "oom_test_events.h"
#include "report/json/oom_json.h"
#include "report/text/oom_text.h"
#include "stacks/frames.h"

namespace memtrace {
namespace {

using namespace test::oom;
using test::driver_alloc;
using test::driver_free;
using test::torch_event;

constexpr uint64_t kPy = 1ull << 63;
constexpr int64_t kMs = 1'000'000;

struct Report {
  std::unique_ptr<Analysis> analysis;
  OomReport oom;
};

// Stack 10 = train.py:42 train_step <- train.py:50 <module>; 11 = train.py:50 <module>;
// 12 = train.py:60 grow <- train.py:50 <module>.
Report report_of(const std::string& name, const std::vector<proto::Event>& events) {
  test::TraceBuilder b;
  b.start().python_frame(1, "train.py", "train_step", 42).python_frame(2, "train.py", "<module>", 50);
  b.python_frame(3, "train.py", "grow", 60);
  b.stack(10, {kPy | 1, kPy | 2}).stack(11, {kPy | 2}).stack(12, {kPy | 3, kPy | 2}).end_chunk();
  for (const proto::Event& e : events) b.event(e);
  b.end_chunk();
  std::string path = test::temp_path(name + ".mtrace");
  test::write_file(path, b.bytes());
  Report r;
  r.analysis = analyze_trace(path, /*with_live_at_peak=*/false);
  r.oom = build_oom_report(*r.analysis);
  return r;
}

std::vector<std::string> causes(const OomDetail& d) {
  std::vector<std::string> names;
  for (const OomDiagnosis& diagnosis : diagnose_oom(d)) names.push_back(oom_cause_name(diagnosis.cause));
  return names;
}

TEST(OomReport, TraceWithoutFailedAllocationHasNone) {
  Report r = report_of("no-oom", {driver_alloc(0, 0x1000, 10 * kMiB, kMs), driver_free(0, 0x1000, kMs)});
  EXPECT_EQ(r.oom.total, 0u);
  EXPECT_TRUE(r.oom.detailed.empty());
}

// 40 MiB held on a 64 MiB device, then 100 MiB asked for: 24 MiB free. 100 > 64: the request alone is
// too large. Allocated = driver = 40 MiB = 62% of the device (< 80%: not "live tensors fill the card"),
// reserved - allocated = 0 (no allocator), one allocation (no growth), no NVML sample.
TEST(OomReport, RequestLargerThanTheDevice) {
  Report r = report_of("too-large", {driver_alloc(0, 0x10000000, 40 * kMiB, kMs, 11),
                                     cuda_malloc_oom(0, 100 * kMiB, 24 * kMiB, 64 * kMiB, kMs, 10)});
  ASSERT_EQ(r.oom.total, 1u);
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  const OomDetail& d = r.oom.detailed[0];
  EXPECT_EQ(d.oom.requested_bytes, 100 * kMiB);
  EXPECT_EQ(d.oom.device, 0);
  EXPECT_EQ(d.oom.stack_id, 10u);
  EXPECT_EQ(d.oom.time_ns, 2 * kMs);
  EXPECT_EQ(d.oom.device_free_bytes, 24 * kMiB);
  EXPECT_EQ(d.device_total_bytes(), 64 * kMiB);
  EXPECT_EQ(d.totals, (DeviceTotals{40 * kMiB, 40 * kMiB, 40 * kMiB}));
  EXPECT_FALSE(d.usage.has_value());
  EXPECT_EQ(d.fragmentation.reserved_minus_allocated_bytes, 0u);
  ASSERT_EQ(d.live_site_count, 1u);
  EXPECT_EQ(d.top_live_sites[0].stack_id, 11u);
  EXPECT_EQ(d.top_live_sites[0].bytes, 40 * kMiB);
  EXPECT_EQ(d.top_live_sites[0].count, 1u);
  EXPECT_EQ(d.growing_site_count, 0u);
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  ASSERT_EQ(diagnoses.size(), 1u);
  EXPECT_EQ(diagnoses[0].cause, OomCause::kRequestExceedsDevice);
  EXPECT_EQ(diagnoses[0].text,
            "the request alone is larger than the device: 100.00 MiB requested, the device has 64.00 MiB in all");
}

// Device of 1000 MiB; this process holds 100 MiB (cudaMalloc) and asks for 300 MiB while 200 MiB are
// free. The sample taken right after the failure says other processes use 650 MiB: 300 > 200 free and
// 650 > this process's 100 MiB driver total -> another process. 650 / 1000 = 65%. Alone: 300 <= 1000,
// allocated 100 / 1000 = 10%, reserved - allocated = 0, one allocation.
std::vector<proto::Event> other_process_events(bool sample_after_oom) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x10000000, 100 * kMiB, kSecond, 11),                                               // t = 1 s
      device_usage(proto::NVML_SAMPLE, 0, 300 * kMiB, 1000 * kMiB, 150 * kMiB, 550 * kMiB, kSecond, 99),  // t = 2 s
      cuda_malloc_oom(0, 300 * kMiB, 200 * kMiB, 1000 * kMiB, kSecond, 10),                               // t = 3 s
  };
  if (sample_after_oom)
    events.push_back(device_usage(proto::CUDA_MALLOC, 0, 200 * kMiB, 1000 * kMiB, 150 * kMiB, 650 * kMiB, 0));
  events.push_back(driver_free(0, 0x10000000, kSecond));
  return events;
}

TEST(OomReport, AnotherProcessHoldsTheMemoryFromTheSampleRightAfterTheFailure) {
  Report r = report_of("other-process", other_process_events(true));
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  const OomDetail& d = r.oom.detailed[0];
  ASSERT_TRUE(d.usage.has_value());
  EXPECT_TRUE(d.usage_after_oom);
  EXPECT_EQ(d.usage->time_ns, 3 * kSecond);
  EXPECT_EQ(d.usage->other_processes_used_bytes, 650 * kMiB);
  EXPECT_EQ(d.usage->process_used_bytes, 150 * kMiB);
  EXPECT_EQ(d.totals.driver_bytes, 100 * kMiB);
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  ASSERT_EQ(diagnoses.size(), 1u);
  EXPECT_EQ(diagnoses[0].cause, OomCause::kOtherProcesses);
  EXPECT_EQ(diagnoses[0].text,
            "another process holds the memory: other processes use 650.00 MiB of the device's 1000.00 MiB (65%), "
            "more than this process's 100.00 MiB from CUDA; 300.00 MiB requested, 200.00 MiB free");
}

// Without a sample after the failure, the latest before it (t = 2 s, others 550 MiB = 55%) is used.
TEST(OomReport, WithoutASampleAfterTheFailureTheLatestBeforeIsUsed) {
  Report r = report_of("other-process-before", other_process_events(false));
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  const OomDetail& d = r.oom.detailed[0];
  ASSERT_TRUE(d.usage.has_value());
  EXPECT_FALSE(d.usage_after_oom);
  EXPECT_EQ(d.usage->time_ns, 2 * kSecond);
  EXPECT_EQ(d.usage->other_processes_used_bytes, 550 * kMiB);
  EXPECT_EQ(causes(d), std::vector<std::string>{"other_processes"});
  EXPECT_EQ(diagnose_oom(d)[0].text,
            "another process holds the memory: other processes use 550.00 MiB of the device's 1000.00 MiB (55%), "
            "more than this process's 100.00 MiB from CUDA; 300.00 MiB requested, 200.00 MiB free");
}

// PyTorch on a 1000 MiB device: one 900 MiB segment filled by three 300 MiB tensors (two from stack 10,
// one from stack 11), then 200 MiB asked for while 100 MiB are free. The segment's cudaMalloc fails,
// then the allocator reports its OOM: one failure, after 1 failed driver allocation. Allocated 900 MiB =
// 90% >= 80% -> live tensors fill the card. Alone: 200 <= 1000, reserved - allocated = 900 - 900 = 0,
// stack 10 has 2 allocations (< 3: no growth), no NVML sample.
TEST(OomReport, LiveTensorsFillTheCardAndDriverFailuresAreFoldedIntoPyTorchsOom) {
  constexpr uint64_t seg = 0x10000000;
  Report r = report_of("live-tensors",
                       {
                           driver_alloc(0, seg, 900 * kMiB, kMs, 11),
                           torch_event(proto::ALLOC, 0, seg, 300 * kMiB, 300 * kMiB, 900 * kMiB, kMs, 10),
                           torch_event(proto::ALLOC, 0, seg + 300 * kMiB, 300 * kMiB, 600 * kMiB, 900 * kMiB, 0, 10),
                           torch_event(proto::ALLOC, 0, seg + 600 * kMiB, 300 * kMiB, 900 * kMiB, 900 * kMiB, 0, 11),
                           cuda_malloc_oom(0, 200 * kMiB, 100 * kMiB, 1000 * kMiB, kSecond, 12),
                           torch_oom(0, 200 * kMiB, 100 * kMiB, 1000 * kMiB, 900 * kMiB, 900 * kMiB, 0, 12),
                       });
  ASSERT_EQ(r.oom.total, 1u);
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  const OomDetail& d = r.oom.detailed[0];
  EXPECT_EQ(d.oom.api, proto::TORCH_ALLOCATOR);
  EXPECT_EQ(d.oom.driver_attempts, 1u);
  EXPECT_TRUE(d.allocator_layer);
  EXPECT_EQ(d.totals, (DeviceTotals{900 * kMiB, 900 * kMiB, 900 * kMiB}));
  EXPECT_EQ(d.fragmentation.reserved_minus_allocated_bytes, 0u);
  ASSERT_EQ(d.live_site_count, 2u);
  EXPECT_EQ(d.top_live_sites[0].stack_id, 10u);
  EXPECT_EQ(d.top_live_sites[0].bytes, 600 * kMiB);
  EXPECT_EQ(d.top_live_sites[0].count, 2u);
  EXPECT_EQ(d.top_live_sites[1].stack_id, 11u);
  EXPECT_EQ(d.top_live_sites[1].bytes, 300 * kMiB);
  EXPECT_EQ(d.growing_site_count, 0u);
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  ASSERT_EQ(diagnoses.size(), 1u);
  EXPECT_EQ(diagnoses[0].cause, OomCause::kLiveTensors);
  EXPECT_EQ(diagnoses[0].text,
            "live tensors fill the card: 900.00 MiB allocated of the device's 1000.00 MiB (90%); the call sites "
            "holding the most are listed under \"live at the failure\"");
}

// PyTorch on a 450 MiB device, two 200 MiB segments (reserved 400 MiB, 50 MiB free):
//   A at 0x10000000: blocks [0, 60) and [100, 160) MiB -> free [60, 100) = 40 and [160, 200) = 40 MiB
//   B at 0x40000000: blocks [0, 50) and [120, 170) MiB -> free [50, 120) = 70 and [170, 200) = 30 MiB
// Allocated 60 + 60 + 50 + 50 = 220 MiB; reserved - allocated = 400 - 220 = 180 MiB >= the 100 MiB
// requested, but the largest free block is 70 MiB < 100 MiB -> fragmentation. Alone: 100 <= 450,
// 220 / 450 = 48% < 80%, two allocations per stack (no growth), no NVML sample.
TEST(OomReport, FragmentationWhenReservedButUnallocatedHasNoBlockLargeEnough) {
  constexpr uint64_t a = 0x10000000, b = 0x40000000;
  Report r = report_of("fragmentation",
                       {
                           driver_alloc(0, a, 200 * kMiB, kMs, 11),
                           driver_alloc(0, b, 200 * kMiB, 0, 11),
                           torch_event(proto::ALLOC, 0, a, 60 * kMiB, 60 * kMiB, 400 * kMiB, kMs, 10),
                           torch_event(proto::ALLOC, 0, a + 100 * kMiB, 60 * kMiB, 120 * kMiB, 400 * kMiB, 0, 10),
                           torch_event(proto::ALLOC, 0, b, 50 * kMiB, 170 * kMiB, 400 * kMiB, 0, 11),
                           torch_event(proto::ALLOC, 0, b + 120 * kMiB, 50 * kMiB, 220 * kMiB, 400 * kMiB, 0, 11),
                           torch_oom(0, 100 * kMiB, 50 * kMiB, 450 * kMiB, 220 * kMiB, 400 * kMiB, kSecond, 12),
                       });
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  const OomDetail& d = r.oom.detailed[0];
  EXPECT_EQ(d.totals.allocated_bytes, 220 * kMiB);
  EXPECT_EQ(d.totals.reserved_bytes, 400 * kMiB);
  EXPECT_TRUE(d.fragmentation.segments_known);
  EXPECT_EQ(d.fragmentation.reserved_minus_allocated_bytes, 180 * kMiB);
  EXPECT_EQ(d.fragmentation.segment_count, 2u);
  EXPECT_EQ(d.fragmentation.largest_free_block_bytes, 70 * kMiB);
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  ASSERT_EQ(diagnoses.size(), 1u);
  EXPECT_EQ(diagnoses[0].cause, OomCause::kFragmentation);
  EXPECT_EQ(diagnoses[0].text,
            "fragmentation: 180.00 MiB reserved but unallocated, largest free block 70.00 MiB < the 100.00 MiB "
            "requested; as PyTorch's own message says, setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "avoids fragmentation");
}

// Driver level on a 1000 MiB device: 20 MiB once at 0.5 s (stack 11), then 10 MiB every second from
// 1 s to 5 s (stack 12, five allocations, none freed), the failure at 6 s, and one more allocation of
// stack 12 at 7 s that must not count. Stack 12 at the failure: 5 live, spanning 5 - 1 = 4 s of the
// 6 - 1 = 5 s since its first allocation (2 x 4 >= 5: grows), 10 MiB per step (median size), one every
// 1 s (median interval). Alone: 10 <= 1000, 70 / 1000 = 7%, reserved - allocated = 0, no NVML sample.
TEST(OomReport, MemoryClimbingBeforeTheFailureNamesTheGrowingSite) {
  std::vector<proto::Event> events = {driver_alloc(0, 0x5000000, 20 * kMiB, 500 * kMs, 11)};
  for (uint64_t i = 0; i < 5; ++i)
    events.push_back(driver_alloc(0, 0x10000000 + i * 0x1000000, 10 * kMiB, i == 0 ? 500 * kMs : kSecond, 12));
  events.push_back(cuda_malloc_oom(0, 10 * kMiB, 5 * kMiB, 1000 * kMiB, kSecond, 12));
  events.push_back(driver_alloc(0, 0x20000000, 10 * kMiB, kSecond, 12));
  Report r = report_of("growth", events);
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  const OomDetail& d = r.oom.detailed[0];
  EXPECT_EQ(d.oom.time_ns, 6 * kSecond);
  EXPECT_EQ(d.totals.allocated_bytes, 70 * kMiB);
  ASSERT_EQ(d.live_site_count, 2u);
  EXPECT_EQ(d.top_live_sites[0].stack_id, 12u);
  EXPECT_EQ(d.top_live_sites[0].bytes, 50 * kMiB);
  EXPECT_EQ(d.top_live_sites[0].count, 5u);
  EXPECT_EQ(d.top_live_sites[1].stack_id, 11u);
  ASSERT_EQ(d.growing_site_count, 1u);
  const LeakSite& g = d.growing_sites[0];
  EXPECT_EQ(g.site.stack_id, 12u);
  EXPECT_EQ(g.growth_count, 5u);
  EXPECT_EQ(g.growth_bytes_per_step, 10 * kMiB);
  EXPECT_EQ(g.median_interval_s, 1.0);
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  ASSERT_EQ(diagnoses.size(), 1u);
  EXPECT_EQ(diagnoses[0].cause, OomCause::kGrowth);
  EXPECT_EQ(diagnoses[0].text,
            "memory climbed step after step before the failure: 1 call site kept allocating; the largest holds "
            "50.00 MiB in 5 allocations of 10.00 MiB per step, one every 1.000 s (median)");
}

// The growth trace above with one site per list (--top 1): still 2 live sites and 1 growing site
// counted, only the largest of each listed.
TEST(OomReport, SitesPerOomLimitsTheListsNotTheCounts) {
  std::vector<proto::Event> events = {driver_alloc(0, 0x5000000, 20 * kMiB, 500 * kMs, 11)};
  for (uint64_t i = 0; i < 5; ++i)
    events.push_back(driver_alloc(0, 0x10000000 + i * 0x1000000, 10 * kMiB, i == 0 ? 500 * kMs : kSecond, 12));
  events.push_back(cuda_malloc_oom(0, 10 * kMiB, 5 * kMiB, 1000 * kMiB, kSecond, 12));
  Report r = report_of("growth-top-1", events);
  OomReport limited = build_oom_report(*r.analysis, 1);
  ASSERT_EQ(limited.detailed.size(), 1u);
  const OomDetail& d = limited.detailed[0];
  EXPECT_EQ(d.live_site_count, 2u);
  ASSERT_EQ(d.top_live_sites.size(), 1u);
  EXPECT_EQ(d.top_live_sites[0].stack_id, 12u);
  EXPECT_EQ(d.growing_site_count, 1u);
  EXPECT_EQ(d.growing_sites.size(), 1u);
}

// The tracer's hook records a DEVICE_USAGE right after each failure, on the failing thread: between the
// failed cudaMalloc and PyTorch's own OOM. The failure is still one OOM (after 1 failed driver
// allocation), described by the sample taken after PyTorch's report (others 700 MiB), not the first one.
TEST(OomReport, SamplesAfterEachFailureDoNotSplitAPyTorchOom) {
  Report r = report_of("folding-with-samples",
                       {
                           driver_alloc(0, 0x10000000, 2 * kMiB, kMs, 11),
                           torch_event(proto::ALLOC, 0, 0x10000000, kMiB, kMiB, 2 * kMiB, 0, 10),
                           cuda_malloc_oom(0, 200 * kMiB, 100 * kMiB, 1000 * kMiB, kMs, 12),
                           device_usage(proto::CUDA_MALLOC, 0, 100 * kMiB, 1000 * kMiB, 50 * kMiB, 690 * kMiB),
                           torch_oom(0, 200 * kMiB, 100 * kMiB, 1000 * kMiB, kMiB, 2 * kMiB, 0, 12),
                           device_usage(proto::TORCH_ALLOCATOR, 0, 100 * kMiB, 1000 * kMiB, 50 * kMiB, 700 * kMiB),
                       });
  ASSERT_EQ(r.oom.total, 1u);
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  const OomDetail& d = r.oom.detailed[0];
  EXPECT_EQ(d.oom.api, proto::TORCH_ALLOCATOR);
  EXPECT_EQ(d.oom.driver_attempts, 1u);
  ASSERT_TRUE(d.usage.has_value());
  EXPECT_TRUE(d.usage_after_oom);
  EXPECT_EQ(d.usage->other_processes_used_bytes, 700 * kMiB);
}

// 105 failures of 1..105 bytes (one thread, driver level: none folded): all counted, the first 100 in
// detail.
TEST(OomReport, OnlyTheFirstHundredOomsGetDetail) {
  std::vector<proto::Event> events = {driver_alloc(0, 0x1000, kMiB, kMs, 11)};
  for (uint64_t i = 1; i <= 105; ++i) events.push_back(cuda_malloc_oom(0, i, 0, 64 * kMiB, kMs, 10));
  Report r = report_of("many", events);
  EXPECT_EQ(r.oom.total, 105u);
  ASSERT_EQ(r.oom.detailed.size(), kMaxOomsDetailed);
  EXPECT_EQ(r.oom.detailed[0].oom.requested_bytes, 1u);
  EXPECT_EQ(r.oom.detailed[99].oom.requested_bytes, 100u);
  EXPECT_EQ(r.oom.detailed[99].totals.driver_bytes, kMiB);
}

// An OOM on device 4096, an ordinal no CUDA device has, is counted by the model and not replayed (it used to
// make the report take the last listed OOM of an empty list); the one on device 0 after it is the only OOM.
TEST(OomReport, AnOomOfAnOrdinalNoDeviceHasIsNotTracked) {
  Report r = report_of("bad-device-oom",
                       {driver_alloc(0, 0x1000, kMiB, kMs, 11), cuda_malloc_oom(4096, 7 * kMiB, 0, 64 * kMiB, kMs, 10),
                        cuda_malloc_oom(0, 5 * kMiB, 0, 64 * kMiB, kMs, 10)});
  EXPECT_EQ(r.analysis->model.health().events_with_bad_device, 1u);
  EXPECT_EQ(r.oom.total, 1u);
  ASSERT_EQ(r.oom.detailed.size(), 1u);
  EXPECT_EQ(r.oom.detailed[0].oom.device, 0);
  EXPECT_EQ(r.oom.detailed[0].oom.requested_bytes, 5 * kMiB);
  EXPECT_EQ(r.oom.detailed[0].totals.driver_bytes, kMiB);
}

// Call-site walks within the work budget. 7 events: 1 MiB and 2 MiB live on stack 11, 4 MiB on stack 12, OOM #1
// (3 live allocations), 8 MiB on stack 10, OOMs #2 and #3 (4 live each). With 1 visit per event and no
// slack, 7 visits: #1 takes 3, #2 the last 4, #3 finds none left. With 6 visits (slack alone): #1 takes 3,
// and #2 would need 4 of the 3 left, so #2 and #3 go without. The other figures are there either way.
TEST(OomReport, CallSiteWalksStopAtTheWorkBudgetAndLaterOomsGoWithout) {
  Report r =
      report_of("site-budget",
                {driver_alloc(0, 0x10000000, kMiB, kMs, 11), driver_alloc(0, 0x20000000, 2 * kMiB, kMs, 11),
                 driver_alloc(0, 0x30000000, 4 * kMiB, kMs, 12), cuda_malloc_oom(0, 100 * kMiB, 0, 64 * kMiB, kMs, 10),
                 driver_alloc(0, 0x40000000, 8 * kMiB, kMs, 10), cuda_malloc_oom(0, 100 * kMiB, 0, 64 * kMiB, kMs, 10),
                 cuda_malloc_oom(0, 100 * kMiB, 0, 64 * kMiB, kMs, 10)});
  ASSERT_EQ(r.analysis->model.next_event_index(), 7u);
  ASSERT_EQ(r.oom.detailed.size(), 3u);
  EXPECT_EQ(r.oom.first_without_call_sites(), 3u);  // the default budget: 2^20 + 4 x 7 visits

  OomReport exact = build_oom_report(*r.analysis, kSitesPerOom, OomSiteBudget{.slack = 0, .per_event = 1});
  ASSERT_EQ(exact.detailed.size(), 3u);
  EXPECT_EQ(exact.first_without_call_sites(), 2u);
  const OomDetail& first = exact.detailed[0];
  EXPECT_TRUE(first.call_sites_listed);
  ASSERT_EQ(first.live_site_count, 2u);
  EXPECT_EQ(first.top_live_sites[0].stack_id, 12u);
  EXPECT_EQ(first.top_live_sites[0].bytes, 4 * kMiB);
  EXPECT_EQ(first.top_live_sites[1].stack_id, 11u);
  EXPECT_EQ(first.top_live_sites[1].bytes, 3 * kMiB);
  EXPECT_EQ(first.top_live_sites[1].count, 2u);
  const OomDetail& second = exact.detailed[1];
  EXPECT_TRUE(second.call_sites_listed);
  ASSERT_EQ(second.live_site_count, 3u);
  EXPECT_EQ(second.top_live_sites[0].stack_id, 10u);
  EXPECT_EQ(second.top_live_sites[0].bytes, 8 * kMiB);
  const OomDetail& third = exact.detailed[2];
  EXPECT_FALSE(third.call_sites_listed);
  EXPECT_EQ(third.live_site_count, 0u);
  EXPECT_TRUE(third.top_live_sites.empty());
  EXPECT_EQ(third.growing_site_count, 0u);
  EXPECT_EQ(third.totals, (DeviceTotals{15 * kMiB, 15 * kMiB, 15 * kMiB}));
  EXPECT_EQ(third.oom.time_ns, 7 * kMs);

  OomReport short_budget = build_oom_report(*r.analysis, kSitesPerOom, OomSiteBudget{.slack = 6, .per_event = 0});
  EXPECT_EQ(short_budget.first_without_call_sites(), 1u);
  EXPECT_EQ(short_budget.detailed[0].live_site_count, 2u);
  EXPECT_FALSE(short_budget.detailed[1].call_sites_listed);
  EXPECT_FALSE(short_budget.detailed[2].call_sites_listed);

  // What the reports say: one line under the count and one per OOM in the text, nulls and a reason in JSON.
  Symbolizer symbolizer(r.analysis->stacks.modules());
  FrameResolver resolver(r.analysis->stacks, symbolizer);
  std::ostringstream text;
  print_oom_report(text, *r.analysis, exact, resolver, TextOptions{});
  std::string out = text.str();
  const std::string reason = "the trace's live set is too large to list at every failure";
  EXPECT_NE(out.find("Failed allocations: 3\nlive call sites not listed for OOMs #3 and later: " + reason + "\n"),
            std::string::npos);
  size_t third_at = out.find("OOM #3:");
  ASSERT_NE(third_at, std::string::npos);
  EXPECT_NE(out.find("  live at the failure: call sites not listed (" + reason + ")\n", third_at), std::string::npos);
  EXPECT_NE(out.find("  live at the failure: 3 call sites\n"), std::string::npos);
  EXPECT_EQ(out.find("call sites not listed ("), out.rfind("call sites not listed ("));  // OOM #3's alone
  nlohmann::json json = oom_report_json(*r.analysis, exact, resolver);
  EXPECT_EQ(json["ooms"][1]["live_call_site_count"], 3);
  EXPECT_FALSE(json["ooms"][1].contains("call_sites_not_listed_reason"));
  for (const char* key : {"live_call_site_count", "live_call_sites", "growing_call_site_count", "growing_call_sites"})
    EXPECT_TRUE(json["ooms"][2][key].is_null()) << key;
  EXPECT_EQ(json["ooms"][2]["call_sites_not_listed_reason"], reason);
  EXPECT_EQ(json["ooms"][2]["allocated_bytes"], 15 * kMiB);
}

// Figures chosen to make every rule but the first apply at once (not a real device), to check the order.
TEST(OomDiagnosis, EveryCauseThatAppliesInTriageOrder) {
  OomDetail d;
  d.oom.requested_bytes = 500 * kMiB;   // fits the 1000 MiB device
  d.oom.device_free_bytes = 10 * kMiB;  // < 500 requested
  d.oom.device_total_bytes = 1000 * kMiB;
  d.usage = DeviceUsage{};
  d.usage->other_processes_used_bytes = 400 * kMiB;              // > 300 MiB driver total
  d.totals = DeviceTotals{900 * kMiB, 2900 * kMiB, 300 * kMiB};  // allocated 90%
  d.fragmentation.reserved_minus_allocated_bytes = 2500 * kMiB;  // >= 500 requested
  d.fragmentation.segments_known = true;
  d.fragmentation.largest_free_block_bytes = 100 * kMiB;  // < 500 requested
  d.growing_site_count = 1;
  EXPECT_EQ(causes(d), (std::vector<std::string>{"other_processes", "live_tensors", "fragmentation", "growth"}));
}

// A request larger than the device is named alone: with the same figures as above but 2000 MiB requested,
// every other rule would apply too, and none of them could have made room for it.
TEST(OomDiagnosis, RequestLargerThanTheDeviceIsTheOnlyCause) {
  OomDetail d;
  d.oom.requested_bytes = 2000 * kMiB;  // > the 1000 MiB device
  d.oom.device_free_bytes = 10 * kMiB;
  d.oom.device_total_bytes = 1000 * kMiB;
  d.usage = DeviceUsage{};
  d.usage->other_processes_used_bytes = 400 * kMiB;
  d.totals = DeviceTotals{900 * kMiB, 2900 * kMiB, 300 * kMiB};
  d.fragmentation.reserved_minus_allocated_bytes = 2500 * kMiB;
  d.fragmentation.segments_known = true;
  d.fragmentation.largest_free_block_bytes = 100 * kMiB;
  d.growing_site_count = 1;
  EXPECT_EQ(causes(d), std::vector<std::string>{"request_exceeds_device"});
  d.oom.requested_bytes = 1000 * kMiB;  // exactly the device: not larger, so the others are named
  EXPECT_EQ(causes(d), (std::vector<std::string>{"other_processes", "live_tensors", "fragmentation", "growth"}));
}

// Other processes below this process's driver total count from 25% of the device on, and never when
// the request would have fit in the free memory.
TEST(OomDiagnosis, OtherProcessesThreshold) {
  OomDetail d;
  d.oom.requested_bytes = 100 * kMiB;
  d.oom.device_free_bytes = 10 * kMiB;
  d.oom.device_total_bytes = 1000 * kMiB;
  d.totals = DeviceTotals{500 * kMiB, 600 * kMiB, 600 * kMiB};
  d.usage = DeviceUsage{};
  d.usage->other_processes_used_bytes = 250 * kMiB;  // 25% exactly, < 600 MiB
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  ASSERT_EQ(causes(d), std::vector<std::string>{"other_processes"});
  EXPECT_EQ(diagnoses[0].text,
            "another process holds the memory: other processes use 250.00 MiB of the device's 1000.00 MiB (25%), "
            "this process holds 600.00 MiB from CUDA; 100.00 MiB requested, 10.00 MiB free");
  d.usage->other_processes_used_bytes = 249 * kMiB;  // 24.9%, < 600 MiB
  EXPECT_TRUE(causes(d).empty());
  d.usage->other_processes_used_bytes = 700 * kMiB;
  d.oom.device_free_bytes = 100 * kMiB;  // the request fitted in the free memory
  EXPECT_TRUE(causes(d).empty());
}

// Where the trace has no segment layout (stream-ordered pools), reserved - allocated >= the request is
// reported as such, without a largest free block.
TEST(OomDiagnosis, FragmentationWithoutSegmentLayout) {
  OomDetail d;
  d.oom.requested_bytes = 64 * kMiB;
  d.oom.device_total_bytes = 1000 * kMiB;
  d.fragmentation.reserved_minus_allocated_bytes = 64 * kMiB;
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  ASSERT_EQ(causes(d), std::vector<std::string>{"fragmentation"});
  EXPECT_EQ(diagnoses[0].text,
            "fragmentation: 64.00 MiB reserved but unallocated, at least the 64.00 MiB requested, yet the allocator "
            "could not use it (its layout of free blocks is not in the trace)");
  d.fragmentation.reserved_minus_allocated_bytes = 64 * kMiB - 1;
  EXPECT_TRUE(causes(d).empty());
}

}  // namespace
}  // namespace memtrace
