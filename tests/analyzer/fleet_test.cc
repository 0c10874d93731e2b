// build_fleet (fleet.h) on hand-built ProcessSummary values: two ranks sharing one GPU, pid reuse, DataLoader
// children, a rank touching GPU 0, untraced memory, leaks merged. Every figure is worked out in the comments.
#include "fleet/fleet.h"

#include <gtest/gtest.h>

#include "fleet_test_processes.h"

namespace memtrace {
namespace {

using namespace test::fleet;

TEST(Fleet, TwoRanksSharingOneGpuAreOneGpuWithBothPeaks) {
  // Given in reverse order: the view sorts by host, then start.
  FleetView view = build_fleet({rank_process(1, 101, kT + 1 * kS, 0, kGpuA, 1 * kGiB, kT + 3 * kS, 2 * kGiB),
                                rank_process(0, 100, kT, 0, kGpuA, 3 * kGiB, kT + 2 * kS, 4 * kGiB)});
  ASSERT_EQ(view.processes.size(), 2u);
  EXPECT_EQ(view.processes[0].pid, 100u);
  EXPECT_EQ(view.processes[1].pid, 101u);
  EXPECT_EQ(view.first_start_unix_ns, kT);
  ASSERT_EQ(view.gpus.size(), 1u);
  const GpuView& gpu = view.gpus[0];
  EXPECT_EQ(gpu.gpu, kGpuA);
  EXPECT_EQ(gpu.host, "node1");
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  EXPECT_EQ(gpu.total_bytes, 140 * kGiB);
  ASSERT_EQ(gpu.users.size(), 2u);
  EXPECT_EQ(gpu.users[0].process, 0u);
  EXPECT_EQ(gpu.users[1].process, 1u);
  EXPECT_EQ(gpu.users[1].peak_allocated, (TimedBytes{1 * kGiB, kT + 3 * kS}));
  EXPECT_EQ(gpu.users[1].peak_reserved, (TimedBytes{2 * kGiB, kT + 3 * kS}));
  // 3 + 1 GiB allocated, 4 + 2 GiB reserved.
  EXPECT_EQ(gpu.sum_of_peak_allocated_bytes, 4 * kGiB);
  EXPECT_EQ(gpu.sum_of_peak_reserved_bytes, 6 * kGiB);
  EXPECT_FALSE(gpu.untraced);
  EXPECT_FALSE(gpu.combined);
  // Ranks: 3 GiB and 1 GiB: rank 0 worst, spread 2 GiB (reserved 4 - 2), median the lower middle, 1 GiB.
  ASSERT_EQ(view.ranks.rows.size(), 2u);
  EXPECT_EQ(view.ranks.rows[0].rank, 0u);
  EXPECT_EQ(view.ranks.rows[1].rank, 1u);
  EXPECT_EQ(view.ranks.rows[1].gpu, kGpuA);
  EXPECT_EQ(view.ranks.rows[1].ordinal, 0);
  EXPECT_EQ(view.ranks.worst, 0u);
  EXPECT_EQ(view.ranks.peak_allocated_spread_bytes, 2 * kGiB);
  EXPECT_EQ(view.ranks.peak_reserved_spread_bytes, 2 * kGiB);
  EXPECT_EQ(view.ranks.median_peak_allocated_bytes, 1 * kGiB);
  // Rank 1's local device 1 does not exist in it (one GPU): its device is where it peaked, ordinal 0. Not wrong.
  EXPECT_TRUE(view.wrong_devices.empty());
  EXPECT_EQ(view.parent, (std::vector<std::optional<size_t>>{std::nullopt, std::nullopt}));
}

TEST(Fleet, RankTableNamesTheWorstAndTheMedianOfThree) {
  // Peaks 5, 9, 7 GiB for ranks 2, 0, 1: worst rank 0, spread 9 - 5 = 4 GiB, median 7 GiB. Reserved 6, 10, 8
  // (peak + 1 GiB each): spread 4 GiB.
  FleetView view = build_fleet({rank_process(2, 12, kT, 0, kGpuA, 5 * kGiB, kT, 6 * kGiB),
                                rank_process(0, 10, kT, 0, kGpuA, 9 * kGiB, kT, 10 * kGiB),
                                rank_process(1, 11, kT, 0, kGpuA, 7 * kGiB, kT, 8 * kGiB)});
  ASSERT_EQ(view.ranks.rows.size(), 3u);
  EXPECT_EQ(view.ranks.rows[0].rank, 0u);
  EXPECT_EQ(view.ranks.rows[0].process, 0u);  // pid 10 sorts first among equal starts
  EXPECT_EQ(view.ranks.worst, 0u);
  EXPECT_EQ(view.ranks.peak_allocated_spread_bytes, 4 * kGiB);
  EXPECT_EQ(view.ranks.peak_reserved_spread_bytes, 4 * kGiB);
  EXPECT_EQ(view.ranks.median_peak_allocated_bytes, 7 * kGiB);
}

TEST(Fleet, ARankTieNamesTheLowestRankWorst) {
  FleetView view = build_fleet({rank_process(1, 11, kT, 0, kGpuA, 2 * kGiB, kT, 2 * kGiB),
                                rank_process(0, 10, kT, 0, kGpuA, 2 * kGiB, kT, 2 * kGiB)});
  EXPECT_EQ(view.ranks.worst, 0u);
  EXPECT_EQ(view.ranks.rows[0].rank, 0u);
  EXPECT_EQ(view.ranks.peak_allocated_spread_bytes, 0u);
}

TEST(Fleet, AReusedPidIsNotTakenForTheParent) {
  // On node1: A (pid 500) lives 0..10 s; B gets pid 500 at 20 s and lives to 30 s. C (ppid 500) starts at 5 s:
  // A's child. D (ppid 500) at 25 s: B's child, not A's. E (ppid 500) at 15 s: neither was pid 500 then (A
  // dead, B not started). F on node2 (ppid 500, 5 s): no process of its host has pid 500.
  FleetView view = build_fleet(
      {process(500, 1, "node1", kT, kT + 10 * kS), process(500, 1, "node1", kT + 20 * kS, kT + 30 * kS),
       process(600, 500, "node1", kT + 5 * kS, kT + 6 * kS), process(601, 500, "node1", kT + 25 * kS, kT + 26 * kS),
       process(602, 500, "node1", kT + 15 * kS, kT + 16 * kS), process(603, 500, "node2", kT + 5 * kS, kT + 6 * kS)});
  // Sorted: A (0 s), C (5 s), E (15 s), B (20 s), D (25 s), then node2's F.
  std::vector<uint32_t> pids;
  for (const ProcessSummary& p : view.processes) pids.push_back(p.pid);
  EXPECT_EQ(pids, (std::vector<uint32_t>{500, 600, 602, 500, 601, 603}));
  EXPECT_EQ(view.parent,
            (std::vector<std::optional<size_t>>{std::nullopt, 0, std::nullopt, std::nullopt, 3, std::nullopt}));
}

// A worker of rank `rank`'s trainer: it inherits RANK and LOCAL_RANK.
ProcessSummary worker(uint32_t pid, uint32_t ppid, uint32_t rank, uint64_t start_unix_ns) {
  ProcessSummary p = process(pid, ppid, "node1", start_unix_ns, kT + 9 * kS);
  p.rank = p.local_rank = rank;
  return p;
}

TEST(Fleet, DataLoaderWorkersAreUnderTheirTrainer) {
  // Two trainers, ranks 0 and 1 (pids 200, 300, both children of torchrun's 100, which was not traced), rank 0
  // with two workers, rank 1 with one.
  ProcessSummary trainer0 = rank_process(0, 200, kT, 0, kGpuA, 2 * kGiB, kT, 2 * kGiB);
  trainer0.ppid = 100;
  ProcessSummary trainer1 = rank_process(1, 300, kT + 1 * kS, 0, kGpuA, 1 * kGiB, kT, 1 * kGiB);
  trainer1.ppid = 100;
  FleetView view = build_fleet({worker(301, 300, 1, kT + 4 * kS), worker(201, 200, 0, kT + 3 * kS), trainer0, trainer1,
                                worker(202, 200, 0, kT + 3 * kS)});
  // Sorted by start: 200 (0 s), 300 (1 s), 201 and 202 (3 s), 301 (4 s).
  std::vector<uint32_t> pids;
  for (const ProcessSummary& p : view.processes) pids.push_back(p.pid);
  EXPECT_EQ(pids, (std::vector<uint32_t>{200, 300, 201, 202, 301}));
  EXPECT_EQ(view.parent, (std::vector<std::optional<size_t>>{std::nullopt, std::nullopt, 0, 0, 1}));
  // The workers are their trainers' children, not ranks: two rows, peaks 2 and 1 GiB (a worker's 0 would make
  // the spread 2 GiB).
  ASSERT_EQ(view.ranks.rows.size(), 2u);
  EXPECT_EQ(view.ranks.rows[0].process, 0u);
  EXPECT_EQ(view.ranks.rows[1].process, 1u);
  EXPECT_EQ(view.ranks.peak_allocated_spread_bytes, 1 * kGiB);
}

TEST(Fleet, ARankTouchingGpuZeroIsCalledOutWithItsFirstAllocation) {
  // Rank 0 uses only device 0 (GPU A). Rank 1 uses device 1 (GPU B, peak 2 GiB) and also device 0 (GPU A, peak
  // 4 GiB, first allocation at 1.5 s from train.py:42 main): by torchrun's convention its own device is
  // LOCAL_RANK 1 although it peaked higher on 0.
  ProcessSummary rank1 = rank_process(1, 101, kT, 1, kGpuB, 2 * kGiB, kT + 2 * kS, 2 * kGiB);
  ProcessDevice zero = device(0, kGpuA, 4 * kGiB, kT + 3 * kS, 4 * kGiB);
  zero.first_allocation_unix_ns = kT + 1500 * kMs;
  zero.first_allocation_site = "train.py:42 main";
  rank1.devices.insert(rank1.devices.begin(), zero);
  FleetView view = build_fleet({rank1, rank_process(0, 100, kT, 0, kGpuA, 3 * kGiB, kT + 2 * kS, 3 * kGiB)});
  ASSERT_EQ(view.processes[1].pid, 101u);
  ASSERT_EQ(view.wrong_devices.size(), 1u);
  const WrongDevice& w = view.wrong_devices[0];
  EXPECT_EQ(w.process, 1u);
  EXPECT_EQ(w.ordinal, 0);
  EXPECT_EQ(w.gpu, kGpuA);
  EXPECT_EQ(w.local_ordinal, 1);
  EXPECT_EQ(w.peak_allocated_bytes, 4 * kGiB);
  EXPECT_EQ(w.first_allocation_unix_ns, kT + 1500 * kMs);
  EXPECT_EQ(w.first_allocation_site, "train.py:42 main");
  // Both GPUs first used at 0 s (rank 0's device 0 and rank 1's device 1 have no first allocation time: their
  // process's start counts), so A then B by UUID. Rank 1's row is where it peaked highest, GPU A, and it is the
  // worst rank (4 GiB against 3).
  ASSERT_EQ(view.gpus.size(), 2u);
  EXPECT_EQ(view.gpus[0].gpu, kGpuA);
  ASSERT_EQ(view.gpus[0].users.size(), 2u);
  EXPECT_EQ(view.gpus[0].users[1].process, 1u);
  EXPECT_EQ(view.gpus[0].users[1].ordinal, 0);
  EXPECT_EQ(view.gpus[0].sum_of_peak_allocated_bytes, 7 * kGiB);
  EXPECT_EQ(view.gpus[1].gpu, kGpuB);
  EXPECT_EQ(view.gpus[1].users[0].ordinal, 1);
  EXPECT_EQ(view.ranks.rows[1].gpu, kGpuA);
  EXPECT_EQ(view.ranks.worst, 1u);
}

TEST(Fleet, WithoutItsLocalOrdinalARanksDeviceIsWhereItPeakedHighest) {
  // Local rank 3 with CUDA_VISIBLE_DEVICES giving it ordinals 0 and 1: its own device is 1 (peak 6 GiB), and
  // device 0 (1 GiB) is the wrong one. A process with no rank at all is never called out.
  ProcessSummary p = rank_process(3, 103, kT, 1, kGpuB, 6 * kGiB, kT, 6 * kGiB);
  p.devices.insert(p.devices.begin(), device(0, kGpuA, 1 * kGiB, kT, 1 * kGiB));
  ProcessSummary no_rank = p;
  no_rank.pid = 104;
  no_rank.rank.reset();
  no_rank.local_rank.reset();
  FleetView view = build_fleet({p, no_rank});
  ASSERT_EQ(view.wrong_devices.size(), 1u);
  EXPECT_EQ(view.wrong_devices[0].process, 0u);
  EXPECT_EQ(view.wrong_devices[0].ordinal, 0);
  EXPECT_EQ(view.wrong_devices[0].local_ordinal, 1);
  EXPECT_EQ(view.wrong_devices[0].peak_allocated_bytes, 1 * kGiB);
}

TEST(Fleet, GpusWithoutUuidAreTheHostAndOrdinal) {
  // No UUIDs: node1's two processes on ordinal 0 share a GPU; node2's ordinal 0 is another.
  FleetView view = build_fleet({rank_process(0, 10, kT, 0, "", 1 * kGiB, kT, 1 * kGiB),
                                rank_process(1, 11, kT + 1, 0, "", 2 * kGiB, kT, 2 * kGiB),
                                rank_process(2, 10, kT, 0, "", 4 * kGiB, kT, 4 * kGiB, "node2")});
  ASSERT_EQ(view.gpus.size(), 2u);
  EXPECT_EQ(view.gpus[0].host, "node1");
  EXPECT_EQ(view.gpus[0].gpu, "");
  EXPECT_EQ(view.gpus[0].ordinal, 0);
  EXPECT_EQ(view.gpus[0].users.size(), 2u);
  EXPECT_EQ(view.gpus[0].sum_of_peak_allocated_bytes, 3 * kGiB);
  EXPECT_EQ(view.gpus[1].host, "node2");
  EXPECT_EQ(view.gpus[1].sum_of_peak_allocated_bytes, 4 * kGiB);
}

TEST(Fleet, UntracedMemoryIsWhatNvmlSawBeyondTheTracedProcesses) {
  // P (pid 300) and Q (pid 301) share GPU A, both alive 0..12 s (P to 10 s).
  //   P's sample at 1 s: others 5 GiB; Q's nearest (1.2 s) used 2 GiB         -> untraced 3 GiB
  //   P's sample at 5 s: others 9 GiB; Q's nearest (5.5 s) used 3 GiB         -> 6 GiB
  //   Q's sample at 1.2 s: others 7 GiB; P's nearest (1 s) used 4 GiB         -> 3 GiB
  //   Q's sample at 5.5 s: others 12 GiB; P's nearest (5 s) used 5 GiB        -> 7 GiB, the largest
  //   Q's sample at 8 s: others 20 GiB; P alive but its nearest is 3 s away    -> not judged
  // NVML's pids: P saw 301 and 999, Q saw 300, 777 and 999; 300 and 301 are traced: untraced 777 and 999. Pid
  // 777 is traced too, but on node2: another process.
  ProcessSummary p = rank_process(0, 300, kT, 0, kGpuA, 4 * kGiB, kT, 4 * kGiB);
  p.end_unix_ns = kT + 10 * kS;
  p.devices[0].samples = {{kT + 1 * kS, 0, 4 * kGiB, 5 * kGiB}, {kT + 5 * kS, 0, 5 * kGiB, 9 * kGiB}};
  p.devices[0].nvml_other_pids = {301, 999};
  ProcessSummary q = rank_process(1, 301, kT, 0, kGpuA, 3 * kGiB, kT, 3 * kGiB);
  q.end_unix_ns = kT + 12 * kS;
  q.devices[0].samples = {{kT + 1200 * kMs, 0, 2 * kGiB, 7 * kGiB},
                          {kT + 5500 * kMs, 0, 3 * kGiB, 12 * kGiB},
                          {kT + 8 * kS, 0, 1 * kGiB, 20 * kGiB}};
  q.devices[0].nvml_other_pids = {300, 777, 999};
  ProcessSummary elsewhere = process(777, 1, "node2", kT, kT + kS);
  FleetView view = build_fleet({q, p, elsewhere});
  ASSERT_EQ(view.gpus.size(), 1u);
  ASSERT_TRUE(view.gpus[0].untraced);
  const UntracedMemory& u = *view.gpus[0].untraced;
  EXPECT_EQ(u.bytes, 7 * kGiB);
  EXPECT_EQ(u.unix_ns, kT + 5500 * kMs);
  EXPECT_EQ(u.seen_by, 1u);  // Q, pid 301
  EXPECT_EQ(u.pids, (std::vector<uint32_t>{777, 999}));
}

TEST(Fleet, AProcessNotAliveAtASampleHeldNothingThen) {
  // P lives 0..2 s; Q's sample at 4 s says others 8 GiB: P had exited, so all 8 GiB are untraced.
  ProcessSummary p = rank_process(0, 300, kT, 0, kGpuA, 4 * kGiB, kT, 4 * kGiB);
  p.end_unix_ns = kT + 2 * kS;
  p.devices[0].samples = {{kT + 1 * kS, 0, 4 * kGiB, 0}};
  ProcessSummary q = rank_process(1, 301, kT, 0, kGpuA, 3 * kGiB, kT, 3 * kGiB);
  q.end_unix_ns = kT + 5 * kS;
  q.devices[0].samples = {{kT + 4 * kS, 0, 3 * kGiB, 8 * kGiB}};
  FleetView view = build_fleet({p, q});
  ASSERT_TRUE(view.gpus[0].untraced);
  EXPECT_EQ(view.gpus[0].untraced->bytes, 8 * kGiB);
  EXPECT_EQ(view.gpus[0].untraced->unix_ns, kT + 4 * kS);
  EXPECT_EQ(view.gpus[0].untraced->seen_by, 1u);
  EXPECT_TRUE(view.gpus[0].untraced->pids.empty());
}

TEST(Fleet, LeaksAreMergedByPortableSite) {
  // Rank 0: train.py:10 100 MiB in 2, model.py:5 10 MiB in 1. Rank 1: train.py:10 50 MiB in 1. Pid 400 (no
  // rank): data.py:7 70 MiB in 3. Merged: train.py:10 150 MiB in 3 (ranks 0, 1), data.py:7 70 MiB, model.py:5
  // 10 MiB.
  ProcessSummary r0 = rank_process(0, 100, kT, 0, kGpuA, kGiB, kT, kGiB);
  r0.leaks = {{0, "py:train.py:10:step", "train.py:10 step", 100 * kMiB, 2},
              {0, "py:model.py:5:forward", "model.py:5 forward", 10 * kMiB, 1}};
  // Its totals are over all its leak candidates: here one more of 5 MiB than the two sites kept.
  r0.leaked_bytes = 115 * kMiB;
  r0.leak_sites = 3;
  ProcessSummary r1 = rank_process(1, 101, kT + 1, 0, kGpuA, kGiB, kT, kGiB);
  r1.leaks = {{0, "py:train.py:10:step", "train.py:10 step", 50 * kMiB, 1}};
  r1.leaked_bytes = 50 * kMiB;
  r1.leak_sites = 1;
  ProcessSummary other = process(400, 1, "node1", kT + 2, kT + kS);
  other.leaks = {{0, "py:data.py:7:load", "data.py:7 load", 70 * kMiB, 3}};
  FleetView view = build_fleet({other, r1, r0});
  ASSERT_EQ(view.leaks.size(), 3u);
  EXPECT_EQ(view.leaks[0].site_key, "py:train.py:10:step");
  EXPECT_EQ(view.leaks[0].site, "train.py:10 step");
  EXPECT_EQ(view.leaks[0].bytes, 150 * kMiB);
  EXPECT_EQ(view.leaks[0].count, 3u);
  EXPECT_EQ(view.leaks[0].processes, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(view.leaks[1].site, "data.py:7 load");
  EXPECT_EQ(view.leaks[1].bytes, 70 * kMiB);
  EXPECT_EQ(view.leaks[1].processes, (std::vector<size_t>{2}));
  EXPECT_EQ(view.leaks[2].bytes, 10 * kMiB);
  EXPECT_EQ(view.ranks.rows[0].leaked_bytes, 115 * kMiB);  // the total, not the sum of the sites kept
  EXPECT_EQ(view.ranks.rows[1].leaked_bytes, 50 * kMiB);
}

TEST(Fleet, NoProcessesIsAnEmptyView) {
  FleetView view = build_fleet({});
  EXPECT_TRUE(view.processes.empty());
  EXPECT_TRUE(view.gpus.empty());
  EXPECT_FALSE(view.ranks.worst);
  EXPECT_EQ(view.first_start_unix_ns, 0u);
}

// The same process named twice (another path to its trace, a copy, a summary given twice) is counted once; a
// process without a start time cannot be told from another of its pid, so it is never taken for a duplicate.
TEST(Fleet, AProcessReadTwiceIsCountedOnce) {
  ProcessSummary a = rank_process(0, 100, kT, 0, kGpuA, kGiB, kT, kGiB);
  a.trace = "a.mtrace";
  ProcessSummary again = a;
  again.trace = "copy-of-a.mtrace";
  ProcessSummary no_start = process(7, 1, "node1", 0, 0);
  no_start.trace = "x.mtrace";
  ProcessSummary no_start_again = no_start;
  no_start_again.trace = "y.mtrace";
  FleetView view = build_fleet({a, again, no_start, no_start_again});
  EXPECT_EQ(view.processes.size(), 3u);
  EXPECT_EQ(view.duplicates, (std::vector<std::string>{"copy-of-a.mtrace"}));
  ASSERT_EQ(view.gpus.size(), 1u);
  EXPECT_EQ(view.gpus[0].users.size(), 1u);
  EXPECT_EQ(view.gpus[0].sum_of_peak_allocated_bytes, kGiB);
}

}  // namespace
}  // namespace memtrace
