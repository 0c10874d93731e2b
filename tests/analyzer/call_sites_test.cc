// Grouping by call site and the step-after-step growth measure, with hand-computed numbers.
#include <gtest/gtest.h>

#include "stacks/call_sites.h"

namespace memtrace {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

LiveAllocation alloc(int32_t device, uint64_t stack_id, uint64_t size, int64_t time_ns) {
  LiveAllocation a;
  a.space = AddressSpace::kTorchBlock;
  a.device = device;
  a.stack_id = stack_id;
  a.size_bytes = size;
  a.time_ns = time_ns;
  return a;
}

TEST(CallSites, GroupsByDeviceAndStackLargestFirst) {
  std::vector<CallSite> sites =
      group_by_call_site({alloc(0, 1, 100, 0), alloc(0, 1, 50, 0), alloc(0, 2, 300, 0), alloc(1, 1, 10, 0)});
  ASSERT_EQ(sites.size(), 3u);
  EXPECT_EQ(sites[0].stack_id, 2u);  // 300 bytes in 1
  EXPECT_EQ(sites[0].bytes, 300u);
  EXPECT_EQ(sites[0].count, 1u);
  EXPECT_EQ(sites[1].stack_id, 1u);  // 100 + 50 = 150 bytes in 2
  EXPECT_EQ(sites[1].device, 0);
  EXPECT_EQ(sites[1].bytes, 150u);
  EXPECT_EQ(sites[1].count, 2u);
  EXPECT_EQ(sites[2].device, 1);  // same stack on device 1 is its own site
  EXPECT_EQ(sites[2].bytes, 10u);
}

TEST(CallSites, GrowingSitesComeFirstWithMedianStepAndInterval) {
  int64_t duration = 10 * kSecond;
  std::vector<LiveAllocation> live = {
      // Site 1: 4 allocations at 1, 3, 5, 7 s: span 6 s >= 10 / 2 -> growing.
      //   sizes sorted 4096, 4096, 4096, 8192: lower median 4096; intervals 2, 2, 2 s: median 2 s.
      alloc(0, 1, 4096, 1 * kSecond),
      alloc(0, 1, 4096, 3 * kSecond),
      alloc(0, 1, 8192, 5 * kSecond),
      alloc(0, 1, 4096, 7 * kSecond),
      // Site 2: 3 x 1 MiB at 1, 2, 3 s: span 2 s < 5 s -> not growing, but the most bytes (3,145,728).
      alloc(0, 2, 1 << 20, 1 * kSecond),
      alloc(0, 2, 1 << 20, 2 * kSecond),
      alloc(0, 2, 1 << 20, 3 * kSecond),
      // Site 3: 2 allocations spanning 9 s: fewer than 3 -> not growing.
      alloc(0, 3, 1000, 0),
      alloc(0, 3, 1000, 9 * kSecond),
  };
  std::vector<LeakSite> leaks = find_leak_sites(live, duration);
  ASSERT_EQ(leaks.size(), 3u);
  EXPECT_EQ(leaks[0].site.stack_id, 1u);
  EXPECT_TRUE(leaks[0].growing);
  EXPECT_EQ(leaks[0].site.bytes, 20480u);  // 3 x 4096 + 8192
  EXPECT_EQ(leaks[0].site.count, 4u);
  EXPECT_EQ(leaks[0].growth_count, 4u);
  EXPECT_EQ(leaks[0].growth_bytes_per_step, 4096u);
  EXPECT_DOUBLE_EQ(leaks[0].median_interval_s, 2.0);
  EXPECT_EQ(leaks[1].site.stack_id, 2u);
  EXPECT_FALSE(leaks[1].growing);
  EXPECT_EQ(leaks[1].site.bytes, 3145728u);
  EXPECT_EQ(leaks[2].site.stack_id, 3u);
  EXPECT_FALSE(leaks[2].growing);
  EXPECT_EQ(leaks[2].site.bytes, 2000u);
}

TEST(CallSites, SpanOfExactlyHalfTheTraceGrows) {
  // 0, 2.5, 5 s in a 10 s trace: span 5 s = half. Intervals 2.5, 2.5 s.
  std::vector<LeakSite> leaks =
      find_leak_sites({alloc(0, 1, 64, 0), alloc(0, 1, 64, 2'500'000'000), alloc(0, 1, 64, 5 * kSecond)}, 10 * kSecond);
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_TRUE(leaks[0].growing);
  EXPECT_DOUBLE_EQ(leaks[0].median_interval_s, 2.5);
  // Just under half: 4.999999999 s of 10 s.
  leaks = find_leak_sites({alloc(0, 1, 64, 0), alloc(0, 1, 64, 1), alloc(0, 1, 64, 5 * kSecond - 1)}, 10 * kSecond);
  EXPECT_FALSE(leaks[0].growing);
}

TEST(CallSites, GrowthWindowStartsAtTheSitesFirstAllocation) {
  // A run whose start-up takes 6 s of 9.1: the loop keeps one 512-byte loss per step from 6.5 s to 9 s
  // (6 steps, 0.5 s apart). Span 2.5 s is less than half of 9.1 s, but the site started at 6.5 s:
  // window 9.1 - 6.5 = 2.6 s, and 2.5 >= 2.6 / 2 -> growing.
  const int64_t ms = 1'000'000;
  std::vector<LiveAllocation> live;
  for (int64_t t = 6500; t <= 9000; t += 500) live.push_back(alloc(0, 1, 512, t * ms));
  // Site 2: parameters, 3 x 4 MiB at 100, 120, 150 ms, kept: window 9 s, span 50 ms -> not growing.
  for (int64_t t : {100, 120, 150}) live.push_back(alloc(0, 2, 4 << 20, t * ms));
  // Site 3: first allocated (and freed) at 0 s, then 3 kept at 8.90, 8.95, 9.00 s: window 9.1 s,
  // span 0.1 s -> not growing.
  for (int64_t t : {8900, 8950, 9000}) live.push_back(alloc(0, 3, 64, t * ms));
  FirstAllocationTimes first = {{{0, 1}, 6500 * ms}, {{0, 2}, 100 * ms}, {{0, 3}, 0}};
  std::vector<LeakSite> leaks = find_leak_sites(live, 9100 * ms, first);
  ASSERT_EQ(leaks.size(), 3u);
  EXPECT_EQ(leaks[0].site.stack_id, 1u);
  EXPECT_TRUE(leaks[0].growing);
  EXPECT_EQ(leaks[0].growth_count, 6u);
  EXPECT_EQ(leaks[0].growth_bytes_per_step, 512u);
  EXPECT_DOUBLE_EQ(leaks[0].median_interval_s, 0.5);
  EXPECT_EQ(leaks[1].site.stack_id, 2u);  // 12 MiB, the most bytes of the rest
  EXPECT_FALSE(leaks[1].growing);
  EXPECT_EQ(leaks[2].site.stack_id, 3u);
  EXPECT_FALSE(leaks[2].growing);
  // Measured from the start of the trace instead, nothing grows and the loss site (3,072 bytes) ranks
  // after the parameters' 12 MiB.
  std::vector<LeakSite> from_start = find_leak_sites(live, 9100 * ms);
  EXPECT_EQ(from_start[1].site.stack_id, 1u);
  EXPECT_FALSE(from_start[1].growing);
}

TEST(CallSites, NoLiveAllocationsNoSites) {
  EXPECT_TRUE(find_leak_sites({}, kSecond).empty());
  EXPECT_TRUE(group_by_call_site({}).empty());
}

}  // namespace
}  // namespace memtrace
