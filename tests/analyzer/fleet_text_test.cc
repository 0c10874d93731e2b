// The text report of many processes (fleet_text.h) on hand-built summaries: every line of a job of two ranks
// sharing GPU A, rank 1 also on its own GPU B, a DataLoader worker under rank 0, an untraced process on GPU A and
// the combined peaks set; and a hostile trace's strings printed escaped.
#include "report/text/fleet_text.h"

#include <gtest/gtest.h>

#include <sstream>

#include "fleet_test_processes.h"

namespace memtrace {
namespace {

using namespace test::fleet;

// Rank 0 (pid 100, 0..10 s): GPU A as device 0, peaks 3 GiB allocated / 4 GiB reserved at 2 s; leaks 100 MiB
// in 2 at train.py:10; its NVML sample at 2 s: itself 3.5 GiB, others 1.5 GiB, pids 101 and 900.
// Rank 1 (pid 101, 1..11 s): GPU B as device 1 (its local device), 2 GiB / 2 GiB at 4 s; GPU A as device 0, 512
// MiB / 1 GiB at 3 s, first allocated at 1.5 s from train.py:42 main; its sample at 2.2 s: itself 1 GiB, others
// 0; leaks 50 MiB in 1 at train.py:10.
// Worker pid 102 (rank 0's child, 5..9 s, truncated): no device.
FleetView job() {
  ProcessSummary rank0 = rank_process(0, 100, kT, 0, kGpuA, 3 * kGiB, kT + 2 * kS, 4 * kGiB);
  rank0.devices[0].samples = {{kT + 2 * kS, 0, 3 * kGiB + 512 * kMiB, 1 * kGiB + 512 * kMiB}};
  rank0.devices[0].nvml_other_pids = {101, 900};
  rank0.leaks = {{0, "py:train.py:10:step", "train.py:10 step", 100 * kMiB, 2}};
  rank0.leaked_bytes = 100 * kMiB;
  rank0.leak_sites = 1;
  ProcessSummary rank1 = rank_process(1, 101, kT + 1 * kS, 1, kGpuB, 2 * kGiB, kT + 4 * kS, 2 * kGiB);
  ProcessDevice zero = device(0, kGpuA, 512 * kMiB, kT + 3 * kS, 1 * kGiB);
  zero.first_allocation_unix_ns = kT + 1500 * kMs;
  zero.first_allocation_site = "train.py:42 main";
  zero.samples = {{kT + 2200 * kMs, 0, 1 * kGiB, 0}};
  rank1.devices.insert(rank1.devices.begin(), zero);
  rank1.leaks = {{1, "py:train.py:10:step", "train.py:10 step", 50 * kMiB, 1}};
  rank1.leaked_bytes = 50 * kMiB;
  rank1.leak_sites = 1;
  ProcessSummary worker = process(102, 100, "node1", kT + 5 * kS, kT + 9 * kS);
  worker.rank = worker.local_rank = 0;
  worker.truncated = true;
  FleetView view = build_fleet({worker, rank1, rank0});
  // As combine_timelines would give it: at 3 s rank 0 held 3 GiB and rank 1 256 MiB allocated; reserved peaked
  // at 2 s with 4 GiB + 1 GiB.
  CombinedTimeline combined;
  combined.peak_allocated = {kT + 3 * kS, 3 * kGiB + 256 * kMiB, 5 * kGiB, {3 * kGiB, 256 * kMiB}, {4 * kGiB, kGiB}};
  combined.peak_reserved = {kT + 2 * kS, 3 * kGiB, 5 * kGiB, {3 * kGiB, 0}, {4 * kGiB, kGiB}};
  view.gpus.at(0).combined = combined;
  return view;
}

TEST(FleetText, TheJobReadsLineByLine) {
  std::ostringstream out;
  print_fleet(out, job(), 10);
  EXPECT_EQ(out.str(),
            "memtrace: 3 processes on 1 host, 2 GPUs; time 0 = 2026-12-02 10:00:00.000 UTC (the earliest start)\n"
            "\n"
            "GPU GPU-aaaaaaaa-0000-0000-0000-000000000000 on node1 (NVIDIA H200, 140.00 GiB): 2 processes\n"
            "  rank 0 (pid 100) as device 0: peak allocated 3.00 GiB at +2.000 s, peak reserved 4.00 GiB at +2.000 s\n"
            "  rank 1 (pid 101) as device 0: peak allocated 512.00 MiB at +3.000 s, peak reserved 1.00 GiB at "
            "+3.000 s\n"
            // 3 GiB + 512 MiB; 4 + 1 GiB.
            "  sum of their peaks: allocated 3.50 GiB, reserved 5.00 GiB (a bound: the peaks need not coincide)\n"
            "  combined peak allocated 3.25 GiB at +3.000 s: rank 0 (pid 100) 3.00 GiB, rank 1 (pid 101) 256.00 MiB\n"
            "  combined peak reserved 5.00 GiB at +2.000 s: rank 0 (pid 100) 4.00 GiB, rank 1 (pid 101) 1.00 GiB\n"
            // At 2 s rank 0's NVML saw 1.5 GiB of others; rank 1's sample 0.2 s later says 1 GiB of it is rank 1.
            // Pid 101 is traced, 900 is not.
            "  untraced processes: 512.00 MiB at +2.000 s (NVML, seen by rank 0 (pid 100)); pids 900\n"
            "\n"
            "GPU GPU-bbbbbbbb-0000-0000-0000-000000000001 on node1 (NVIDIA H200, 140.00 GiB): 1 process\n"
            "  rank 1 (pid 101) as device 1: peak allocated 2.00 GiB at +4.000 s, peak reserved 2.00 GiB at +4.000 s\n"
            // Rank 1's row is GPU B, where it peaked highest: 3 - 2 GiB allocated, 4 - 2 GiB reserved; median of
            // 2 and 3 GiB the lower. The worker is rank 0's child, not a row.
            "\n"
            "Ranks: 2, worst rank 0 (pid 100); peak allocated spread 1.00 GiB, median 2.00 GiB; peak reserved "
            "spread 2.00 GiB\n"
            "  rank  pid      host        device  allocated   at          reserved    at          leaked      OOMs\n"
            "  0     100      node1       0       3.00 GiB    +2.000 s    4.00 GiB    +2.000 s    100.00 MiB  0  <- "
            "worst\n"
            "  1     101      node1       1       2.00 GiB    +4.000 s    2.00 GiB    +4.000 s    50.00 MiB   0\n"
            "\n"
            "WRONG DEVICE: rank 1 (pid 101) allocated 512.00 MiB on GPU 0 (GPU-aaaaaaaa-0000-0000-0000-000000000000), "
            "not its local device 1: first at train.py:42 main (+1.500 s)\n"
            "\n"
            "Processes: 3 (children under their parent)\n"
            "  rank 0 (pid 100) on node1, +0.000 s to +10.000 s: python train.py  [trace.100.mtrace]\n"
            "    pid 102 (child of rank 0) on node1, +5.000 s to +9.000 s: python train.py  [trace.102.mtrace] (trace "
            "truncated)\n"
            "  rank 1 (pid 101) on node1, +1.000 s to +11.000 s: python train.py  [trace.101.mtrace]\n"
            "\n"
            "Leak candidates merged by call site: 1 site\n"
            "  #1 150.00 MiB in 3 allocations at train.py:10 step: 2 processes (ranks 0, 1)\n");
}

TEST(FleetText, MergedLeaksNameRanksAndPidsAndKeepTheTop) {
  // Three sites, 30, 20 and 10 MiB; top 2 shown. The 20 MiB one is in rank 3 and pid 7 (no rank).
  ProcessSummary r3 = rank_process(3, 5, kT, 0, kGpuA, kGiB, kT, kGiB);
  r3.leaks = {{0, "a", "a.py:1 f", 30 * kMiB, 3}, {0, "b", "b.py:2 g", 10 * kMiB, 1}};
  ProcessSummary p7 = process(7, 1, "node1", kT + 1, kT + kS);
  p7.leaks = {{0, "c", "", 20 * kMiB, 1}};
  std::ostringstream out;
  print_merged_leaks(out, build_fleet({r3, p7}), 2);
  EXPECT_EQ(out.str(),
            "\nLeak candidates merged by call site: 3 sites (top 2 shown)\n"
            "  #1 30.00 MiB in 3 allocations at a.py:1 f: 1 process (rank 3)\n"
            "  #2 20.00 MiB in 1 allocation at (no stack): 1 process (pid 7)\n");
}

TEST(FleetText, AGpuWithoutUuidAndAProcessWithoutStartRecord) {
  ProcessSummary p = rank_process(0, 10, 0, 2, "", kGiB, 0, kGiB);
  p.end_unix_ns = 0;
  p.devices[0].name.clear();
  p.devices[0].total_bytes = 0;
  std::ostringstream out;
  FleetView view = build_fleet({p});
  print_fleet_overview(out, view);
  print_fleet_gpus(out, view);
  EXPECT_EQ(out.str(),
            "memtrace: 1 process on 1 host, 1 GPU; no start times recorded\n"
            "\n"
            "GPU device 2 of node1 (no UUID): 1 process\n"
            "  rank 0 (pid 10) as device 2: peak allocated 1.00 GiB at an unknown time, peak reserved 1.00 GiB at an "
            "unknown time\n");
}

TEST(FleetText, AHostileTracesStringsAreEscaped) {
  // Whatever the traced program put in its host name, command line, trace name, GPU name or call sites must not
  // reach the terminal raw: an ESC would clear the screen, a newline forge a report line.
  ProcessSummary p = rank_process(0, 10, kT, 0, kGpuA, kGiB, kT, kGiB, "node\x1b[2J");
  p.argv = {"python", "train.py\nWRONG DEVICE: forged"};
  p.trace = "t\x07.mtrace";
  p.devices[0].name = "H200\x1b]0;x\x07";
  ProcessDevice zero = device(1, "GPU-\x9b", kGiB, kT, kGiB);
  zero.first_allocation_site = "x.py:1 \x1b[31mred";
  p.devices.push_back(zero);
  p.leaks = {{0, "k", "leak\rline", kMiB, 1}};
  std::ostringstream out;
  print_fleet(out, build_fleet({p}), 10);
  const std::string text = out.str();
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.find("\nWRONG DEVICE: forged"), std::string::npos) << text;
  EXPECT_NE(text.find("on node\\x1b[2J"), std::string::npos) << text;
  EXPECT_NE(text.find("train.py\\nWRONG DEVICE: forged"), std::string::npos) << text;
  EXPECT_NE(text.find("[t\\x07.mtrace]"), std::string::npos) << text;
  EXPECT_NE(text.find("(H200\\x1b]0;x\\x07, 140.00 GiB)"), std::string::npos) << text;
  EXPECT_NE(text.find("(GPU-\\x9b)"), std::string::npos) << text;
  EXPECT_NE(text.find("first at x.py:1 \\x1b[31mred"), std::string::npos) << text;
  EXPECT_NE(text.find("at leak\\rline"), std::string::npos) << text;
}

// A process's OOMs are named in the tree, a process without a rank's too (it has no row in the rank table).
TEST(FleetText, TheTreeNamesEveryProcesssOoms) {
  ProcessSummary p = rank_process(0, 10, kT, 0, kGpuA, kGiB, kT, kGiB);
  p.rank.reset();
  p.devices[0].ooms = 2;
  std::ostringstream out;
  print_process_tree(out, build_fleet({p}));
  EXPECT_EQ(out.str(),
            "\nProcesses: 1 (children under their parent)\n"
            "  pid 10 on node1, +0.000 s to +10.000 s: python train.py  [trace.10.mtrace]  2 OOMs\n");
}

}  // namespace
}  // namespace memtrace
