// The tracer's sample rules that need no CUDA: which pool samples are written (pool_sample_table.h) and how
// NVML's process list splits into this process and the others (nvml_processes.h), and when the list of the
// others is written (record/nvml_list.h).
#include <gtest/gtest.h>

#include "record/nvml_list.h"
#include "samplers/nvml_processes.h"
#include "samplers/pool_sample_table.h"

namespace memtrace {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(PoolSampleTable, WritesFirstSamplesAndChangesOnly) {
  PoolSampleTable t;
  EXPECT_FALSE(t.contains(0xA0, 0));
  EXPECT_TRUE(t.update(0xA0, 0, 0));  // a pool's first sample is written, even of 0 bytes
  EXPECT_TRUE(t.contains(0xA0, 0));
  EXPECT_FALSE(t.update(0xA0, 0, 0));        // unchanged
  EXPECT_TRUE(t.update(0xA0, 0, 4 * kMiB));  // grew
  EXPECT_FALSE(t.update(0xA0, 0, 4 * kMiB));
  EXPECT_TRUE(t.update(0xA0, 0, 2 * kMiB));  // shrank
  EXPECT_TRUE(t.update(0xB0, 1, 2 * kMiB));  // another pool, same size: its own first sample
  EXPECT_TRUE(t.update(0, 1, 6 * kMiB));     // device 1's graph pool is pool 0 of device 1 ...
  EXPECT_TRUE(t.update(0, 0, 6 * kMiB));     // ... and device 0's another slot
  EXPECT_FALSE(t.update(0, 1, 6 * kMiB));
  EXPECT_EQ(t.size(), 4);
  EXPECT_EQ(t.device_of(0xB0), 1);
  EXPECT_EQ(t.device_of(0xC0), -1);
}

TEST(PoolSampleTable, ListsPoolsButNotGraphPoolsAndFreesSlots) {
  PoolSampleTable t;
  t.update(0xA0, 0, 2 * kMiB);
  t.update(0, 0, 2 * kMiB);  // graph pool: not sampled at synchronizations
  t.update(0xB0, 1, 0);
  uint64_t pools[4];
  int devices[4];
  ASSERT_EQ(t.pools(pools, devices, 4), 2);
  EXPECT_EQ(pools[0], 0xA0u);
  EXPECT_EQ(devices[0], 0);
  EXPECT_EQ(pools[1], 0xB0u);
  EXPECT_EQ(devices[1], 1);
  EXPECT_EQ(t.pools(pools, devices, 1), 1);  // at most `max`
  EXPECT_EQ(t.remove(0xA0), 1);
  EXPECT_EQ(t.remove(0xA0), 0);
  EXPECT_EQ(t.size(), 2);
  EXPECT_TRUE(t.update(0xA0, 0, 2 * kMiB));  // a pool created again at the same address starts afresh
}

TEST(PoolSampleTable, SynchronizationSamplesNeverBringBackARemovedPool) {
  PoolSampleTable t;
  t.update(0xA0, 0, 4 * kMiB);
  EXPECT_TRUE(t.update(0xA0, 0, 2 * kMiB, /*add=*/false));   // a pool in the table: as usual
  EXPECT_EQ(t.remove(0xA0), 1);                              // destroyed by another thread meanwhile
  EXPECT_FALSE(t.update(0xA0, 0, 2 * kMiB, /*add=*/false));  // the synchronization's late sample: dropped
  EXPECT_FALSE(t.contains(0xA0, 0));
  EXPECT_EQ(t.size(), 0);
}

TEST(PoolSampleTable, FullTableSamplesNoNewPool) {
  PoolSampleTable t;
  for (uint64_t pool = 1; pool <= PoolSampleTable::kSlots; pool++) EXPECT_TRUE(t.update(pool, 0, pool));
  EXPECT_FALSE(t.update(1000, 0, 5));  // 65th pool: no slot, nothing written
  EXPECT_FALSE(t.contains(1000, 0));
  EXPECT_TRUE(t.update(1, 0, 7));  // the pools in the table go on
  EXPECT_EQ(t.remove(2), 1);
  EXPECT_TRUE(t.update(1000, 0, 5));  // a freed slot takes the new one
}

TEST(NvmlProcesses, SplitsOwnUseFromOthers) {
  // Us (pid 40) twice, as MIG lists one entry per compute instance: 100 + 28 = 128 MiB; others 300 + 50 MiB.
  NvmlProcessInfo list[] = {{7, 300 * kMiB, 0, 0}, {40, 100 * kMiB, 1, 0}, {9, 50 * kMiB, 0, 0}, {40, 28 * kMiB, 2, 0}};
  ProcessUsage u = split_process_usage(list, 4, 40);
  EXPECT_TRUE(u.known);
  EXPECT_EQ(u.process_used_bytes, 128 * kMiB);
  EXPECT_EQ(u.other_processes_used_bytes, 350 * kMiB);
}

TEST(NvmlProcesses, OthersWithoutFiguresCountZero) {
  constexpr unsigned long long kNotAvailable = ~0ULL;
  NvmlProcessInfo list[] = {{7, 300 * kMiB, 0, 0}, {8, kNotAvailable, 0, 0}, {40, 5 * kMiB, 0, 0}};
  ProcessUsage u = split_process_usage(list, 3, 40);
  EXPECT_TRUE(u.known);
  EXPECT_EQ(u.process_used_bytes, 5 * kMiB);
  EXPECT_EQ(u.other_processes_used_bytes, 300 * kMiB);  // 300 + 0 for pid 8
}

TEST(NvmlProcesses, UnknownWhenOurFigureIsUnavailableOrOurPidIsNotListed) {
  constexpr unsigned long long kNotAvailable = ~0ULL;
  NvmlProcessInfo unavailable[] = {{40, kNotAvailable, 0, 0}};
  EXPECT_FALSE(split_process_usage(unavailable, 1, 40).known);
  // Host pids seen from a container: one of these is us under another pid.
  NvmlProcessInfo others[] = {{7, 300 * kMiB, 0, 0}, {9, 800 * kMiB, 0, 0}};
  EXPECT_FALSE(split_process_usage(others, 2, 40).known);
  ProcessUsage empty = split_process_usage(nullptr, 0, 40);  // nobody on the device
  EXPECT_TRUE(empty.known);
  EXPECT_EQ(empty.process_used_bytes, 0u);
  EXPECT_EQ(empty.other_processes_used_bytes, 0u);
}


TEST(OtherProcesses, ByPidOncePerPidWithoutUs) {
  // NVML's order is its own; pid 300 listed twice (two MIG instances), pid 200 once without a figure and once with.
  const NvmlProcessInfo list[] = {{300, 4 * kMiB, 1, 0}, {7, 100 * kMiB, 0, 0},     {200, ~0ULL, 0, 0},
                                  {100, 0, 0, 0},        {300, 2 * kMiB, 2, 0},     {200, 8 * kMiB, 0, 0}};
  NvmlOtherProcess others[kMaxNvmlProcesses];
  ASSERT_EQ(other_processes(list, 6, 7, others), 3u);
  EXPECT_EQ(others[0], (NvmlOtherProcess{100, true, 0}));
  EXPECT_EQ(others[1], (NvmlOtherProcess{200, false, 0}));  // one entry without a figure: unknown
  EXPECT_EQ(others[2], (NvmlOtherProcess{300, true, 6 * kMiB}));
  EXPECT_EQ(other_processes(list, 0, 7, others), 0u);
  const NvmlProcessInfo only_us[] = {{7, kMiB, 0, 0}};
  EXPECT_EQ(other_processes(only_us, 1, 7, others), 0u);
}

TEST(OtherProcesses, AFullListOfOthersFits) {
  NvmlProcessInfo list[kMaxNvmlProcesses];
  for (unsigned i = 0; i < kMaxNvmlProcesses; i++) list[i] = {kMaxNvmlProcesses - i, i, 0, 0};  // descending pids
  NvmlOtherProcess others[kMaxNvmlProcesses];
  ASSERT_EQ(other_processes(list, kMaxNvmlProcesses, 0, others), kMaxNvmlProcesses);
  EXPECT_EQ(others[0], (NvmlOtherProcess{1, true, kMaxNvmlProcesses - 1}));
  EXPECT_EQ(others[kMaxNvmlProcesses - 1], (NvmlOtherProcess{kMaxNvmlProcesses, true, 0}));
}

TEST(NvmlListTable, WritesChangesOnlyPerDeviceAndTrace) {
  static NvmlListTable t;  // 64 KiB: not on the test's stack
  const NvmlOtherProcess a[] = {{100, true, kMiB}, {200, true, 2 * kMiB}};
  const NvmlOtherProcess a_grown[] = {{100, true, kMiB}, {200, true, 3 * kMiB}};
  const NvmlOtherProcess a_unknown[] = {{100, true, kMiB}, {200, false, 0}};
  EXPECT_FALSE(t.changed(0, nullptr, 0, 1));  // the empty list is what a reader holds before any record
  EXPECT_TRUE(t.changed(0, a, 2, 1));
  t.remember(0, a, 2, 1);
  EXPECT_FALSE(t.changed(0, a, 2, 1));
  EXPECT_TRUE(t.changed(0, a, 1, 1));         // one process left
  EXPECT_TRUE(t.changed(0, nullptr, 0, 1));   // all left: an empty record
  EXPECT_TRUE(t.changed(0, a_grown, 2, 1));   // a figure changed
  EXPECT_TRUE(t.changed(0, a_unknown, 2, 1));  // a figure became unknown
  EXPECT_TRUE(t.changed(1, a, 2, 1));          // device 1 has its own list
  EXPECT_TRUE(t.changed(0, a, 2, 2));          // a forked child's new trace starts empty ...
  EXPECT_FALSE(t.changed(0, nullptr, 0, 2));
  t.remember(0, nullptr, 0, 1);
  EXPECT_FALSE(t.changed(0, nullptr, 0, 1));
  EXPECT_TRUE(t.changed(64, nullptr, 0, 1));  // out of the table: always written
  EXPECT_TRUE(t.changed(-1, nullptr, 0, 1));
}

}  // namespace
}  // namespace memtrace
