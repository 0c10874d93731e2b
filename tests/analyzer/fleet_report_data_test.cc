// The HTML report's data of many processes (report/html/fleet_report_data.h) on FleetView values built here,
// every figure worked out by hand: wall-clock times as ns since the earliest start (null where unknown, negative
// before it), the process tree in order, each process device's GPU, the combined timeline with each member's
// share (null at a thinned point), the ranks, a wrong device, merged leaks, integers past 2^53 - 1 clamped,
// indices outside the view written null; an empty view; a parent cycle listed once.
#include <gtest/gtest.h>

#include <string>

#include "report/html/fleet_report_data.h"

namespace memtrace {
namespace {

using nlohmann::json;

constexpr uint64_t T = 1764676800000000000ull;  // the earliest start: 2025-12-02 12:00:00 UTC
constexpr uint64_t kHuge = 1ull << 60;          // past JavaScript's exact integers
constexpr int64_t kMaxExact = (int64_t(1) << 53) - 1;

ProcessDevice device(int32_t ordinal, std::string gpu, TimedBytes allocated, TimedBytes reserved) {
  ProcessDevice d;
  d.ordinal = ordinal;
  d.gpu = std::move(gpu);
  d.name = "NVIDIA H200";
  d.total_bytes = 150'000'000'000;
  d.peak_allocated = allocated;
  d.peak_reserved = reserved;
  return d;
}

// Two ranks on one host sharing GPU-aaaa (rank 1 should only use its own GPU-bbbb), and a DataLoader worker of
// rank 0 that used no GPU:
//   0: pid 100 rank 0, GPU-aaaa (ordinal 0) peaks 1000 / 2048 B at +2 s, 1 OOM, leaks 300 B in 3 allocations
//   1: pid 101 rank 1, GPU-aaaa (ordinal 0) 512 / 1024 B at +3 us; GPU-bbbb (ordinal 1) 2^60 B at +4 s;
//      no end time; leaks 200 B in 2
//   2: pid 102 the worker (ppid 100), started at +1 s
FleetView two_ranks() {
  FleetView f;
  ProcessSummary r0;
  r0.trace = "r0.mtrace";
  r0.pid = 100;
  r0.ppid = 1;
  r0.host = "node1";
  r0.rank = 0;
  r0.local_rank = 0;
  r0.world_size = 2;
  r0.job_id = "j1";
  r0.argv = {"python", "train.py"};
  r0.start_unix_ns = T;
  r0.end_unix_ns = T + 5'000'000'000;
  r0.devices = {device(0, "GPU-aaaa", {1000, T + 2'000'000'000}, {2048, T + 2'000'000'000})};
  r0.devices[0].final_allocated_bytes = 100;
  r0.devices[0].final_reserved_bytes = 2048;
  r0.devices[0].allocations = 7;
  r0.devices[0].first_allocation_unix_ns = T + 1000;
  r0.devices[0].first_allocation_site = "train.py:10 main";
  r0.devices[0].ooms = 1;
  r0.leaks = {{0, "k1", "train.py:20 step", 300, 3}};

  ProcessSummary r1 = r0;
  r1.trace = "r1.mtrace";
  r1.pid = 101;
  r1.rank = 1;
  r1.local_rank = 1;
  r1.start_unix_ns = T + 500;
  r1.end_unix_ns = 0;
  r1.truncated = true;
  r1.devices = {device(0, "GPU-aaaa", {512, T + 3000}, {1024, T + 3000}),
                device(1, "GPU-bbbb", {kHuge, T + 4'000'000'000}, {kHuge, T + 4'000'000'000})};
  r1.devices[0].final_reserved_bytes = 1024;
  r1.devices[0].allocations = 1;
  r1.devices[0].first_allocation_unix_ns = T + 3000;
  r1.devices[0].first_allocation_site = "train.py:5 <module>";
  r1.devices[1].allocations = 2;
  r1.devices[1].first_allocation_unix_ns = T + 2000;
  r1.devices[1].first_allocation_site = "train.py:9 main";
  r1.leaks = {{0, "k1", "train.py:20 step", 200, 2}};

  ProcessSummary worker;
  worker.trace = "w.mtrace";
  worker.pid = 102;
  worker.ppid = 100;
  worker.host = "node1";
  worker.argv = {"python", "-c", "worker"};
  worker.start_unix_ns = T + 1'000'000'000;
  worker.end_unix_ns = T + 3'000'000'000;

  f.processes = {r0, r1, worker};
  f.first_start_unix_ns = T;
  f.parent = {std::nullopt, std::nullopt, 0};

  GpuView a;
  a.gpu = "GPU-aaaa";
  a.host = "node1";
  a.ordinal = 0;
  a.name = "NVIDIA H200";
  a.total_bytes = 150'000'000'000;
  a.users = {{0, 0, {1000, T + 2'000'000'000}, {2048, T + 2'000'000'000}}, {1, 0, {512, T + 3000}, {1024, T + 3000}}};
  a.sum_of_peak_allocated_bytes = 1512;
  a.sum_of_peak_reserved_bytes = 3072;
  a.untraced = UntracedMemory{4096, T - 5, 0, {555}};  // a sample 5 ns before the origin: a negative time
  CombinedTimeline c;
  c.peak_allocated = {T + 2'000'000'000, 1400, 3072, {1000, 400}, {2048, 1024}};
  c.peak_reserved = {T + 3000, 612, 3072, {100, 512}, {2048, 1024}};
  c.points = {{T + 1000, 100, 2048, {100, 0}, {2048, 0}},
              {T + 3000, 612, 3072, {100, 512}, {2048, 1024}},
              {T + 2'000'000'000, 1400, 3072, {1000, 400}, {2048, 1024}},
              {T + 4'000'000'000, 400, 1024, {}, {}}};  // a thinned point: no shares
  c.changes = 7;
  a.combined = c;

  GpuView b;
  b.gpu = "GPU-bbbb";
  b.host = "node1";
  b.ordinal = 1;
  b.name = "NVIDIA H200";
  b.total_bytes = 150'000'000'000;
  b.users = {{1, 1, {kHuge, T + 4'000'000'000}, {kHuge, T + 4'000'000'000}}};
  b.sum_of_peak_allocated_bytes = kHuge;
  b.sum_of_peak_reserved_bytes = kHuge;
  f.gpus = {a, b};

  f.ranks.rows = {{0, 0, "GPU-aaaa", 0, {1000, T + 2'000'000'000}, {2048, T + 2'000'000'000}, 300, 1},
                  {1, 1, "GPU-bbbb", 1, {kHuge, T + 4'000'000'000}, {kHuge, T + 4'000'000'000}, 200, 0}};
  f.ranks.worst = 1;
  f.ranks.peak_allocated_spread_bytes = kHuge - 1000;
  f.ranks.peak_reserved_spread_bytes = kHuge - 2048;
  f.ranks.median_peak_allocated_bytes = 1000;
  f.wrong_devices = {{1, 0, "GPU-aaaa", 1, 512, T + 3000, "train.py:5 <module>"}};
  // The second leak names a process outside the view (index 7): written null.
  f.leaks = {{"k1", "train.py:20 step", 500, 5, {0, 1}}, {"k2", "</script><b>x", 10, 1, {7}}};
  return f;
}

TEST(FleetReportData, TwoRanksAndAWorker) {
  const json expected = json::parse(R"({
    "format": 1, "kind": "fleet", "origin_unix_ns": "1764676800000000000",
    "summary": {"processes": 3, "hosts": 1, "gpus": 2, "ranks": 2,
                "worst_rank": {"rank": 1, "process": 1,
                               "peak_allocated": {"bytes": 9007199254740991, "time_ns": 4000000000}},
                "largest_combined_peak": {"gpu": 0, "allocated_bytes": 1400, "time_ns": 2000000000},
                "wrong_devices": 1, "leak_sites": 2},
    "processes": [
      {"trace": "r0.mtrace", "pid": 100, "ppid": 1, "parent": null, "host": "node1", "rank": 0, "local_rank": 0,
       "world_size": 2, "job_id": "j1", "command": "python train.py", "start_ns": 0, "end_ns": 5000000000,
       "truncated": false,
       "devices": [{"ordinal": 0, "gpu": "GPU-aaaa", "name": "NVIDIA H200", "gpu_index": 0,
                    "total_bytes": 150000000000,
                    "peak_allocated": {"bytes": 1000, "time_ns": 2000000000},
                    "peak_reserved": {"bytes": 2048, "time_ns": 2000000000},
                    "final_allocated_bytes": 100, "final_reserved_bytes": 2048, "allocations": 7, "ooms": 1,
                    "first_allocation_ns": 1000, "first_allocation_site": "train.py:10 main"}],
       "leaked_bytes": 300, "leaked_allocations": 3, "ooms": 1},
      {"trace": "r1.mtrace", "pid": 101, "ppid": 1, "parent": null, "host": "node1", "rank": 1, "local_rank": 1,
       "world_size": 2, "job_id": "j1", "command": "python train.py", "start_ns": 500, "end_ns": null,
       "truncated": true,
       "devices": [{"ordinal": 0, "gpu": "GPU-aaaa", "name": "NVIDIA H200", "gpu_index": 0,
                    "total_bytes": 150000000000,
                    "peak_allocated": {"bytes": 512, "time_ns": 3000},
                    "peak_reserved": {"bytes": 1024, "time_ns": 3000},
                    "final_allocated_bytes": 0, "final_reserved_bytes": 1024, "allocations": 1, "ooms": 0,
                    "first_allocation_ns": 3000, "first_allocation_site": "train.py:5 <module>"},
                   {"ordinal": 1, "gpu": "GPU-bbbb", "name": "NVIDIA H200", "gpu_index": 1,
                    "total_bytes": 150000000000,
                    "peak_allocated": {"bytes": 9007199254740991, "time_ns": 4000000000},
                    "peak_reserved": {"bytes": 9007199254740991, "time_ns": 4000000000},
                    "final_allocated_bytes": 0, "final_reserved_bytes": 0, "allocations": 2, "ooms": 0,
                    "first_allocation_ns": 2000, "first_allocation_site": "train.py:9 main"}],
       "leaked_bytes": 200, "leaked_allocations": 2, "ooms": 0},
      {"trace": "w.mtrace", "pid": 102, "ppid": 100, "parent": 0, "host": "node1", "rank": null,
       "local_rank": null, "world_size": null, "job_id": "", "command": "python -c worker",
       "start_ns": 1000000000, "end_ns": 3000000000, "truncated": false, "devices": [],
       "leaked_bytes": 0, "leaked_allocations": 0, "ooms": 0}],
    "tree": [{"process": 0, "depth": 0}, {"process": 2, "depth": 1}, {"process": 1, "depth": 0}],
    "gpus": [
      {"gpu": "GPU-aaaa", "host": "node1", "ordinal": 0, "name": "NVIDIA H200", "total_bytes": 150000000000,
       "users": [{"process": 0, "ordinal": 0, "peak_allocated": {"bytes": 1000, "time_ns": 2000000000},
                  "peak_reserved": {"bytes": 2048, "time_ns": 2000000000}},
                 {"process": 1, "ordinal": 0, "peak_allocated": {"bytes": 512, "time_ns": 3000},
                  "peak_reserved": {"bytes": 1024, "time_ns": 3000}}],
       "sum_of_peak_allocated_bytes": 1512, "sum_of_peak_reserved_bytes": 3072,
       "untraced": {"bytes": 4096, "time_ns": -5, "seen_by": 0, "pids": [555]},
       "combined": {
         "members": [0, 1], "changes": 7,
         "peak_allocated": {"time_ns": 2000000000, "allocated_bytes": 1400, "reserved_bytes": 3072,
                            "member_allocated_bytes": [1000, 400], "member_reserved_bytes": [2048, 1024]},
         "peak_reserved": {"time_ns": 3000, "allocated_bytes": 612, "reserved_bytes": 3072,
                           "member_allocated_bytes": [100, 512], "member_reserved_bytes": [2048, 1024]},
         "points": {"t_ns": [1000, 3000, 2000000000, 4000000000],
                    "allocated_bytes": [100, 612, 1400, 400],
                    "reserved_bytes": [2048, 3072, 3072, 1024],
                    "member_allocated_bytes": [[100, 100, 1000, null], [0, 512, 400, null]],
                    "member_reserved_bytes": [[2048, 2048, 2048, null], [0, 1024, 1024, null]]}}},
      {"gpu": "GPU-bbbb", "host": "node1", "ordinal": 1, "name": "NVIDIA H200", "total_bytes": 150000000000,
       "users": [{"process": 1, "ordinal": 1,
                  "peak_allocated": {"bytes": 9007199254740991, "time_ns": 4000000000},
                  "peak_reserved": {"bytes": 9007199254740991, "time_ns": 4000000000}}],
       "sum_of_peak_allocated_bytes": 9007199254740991, "sum_of_peak_reserved_bytes": 9007199254740991,
       "untraced": null, "combined": null}],
    "ranks": {
      "rows": [{"rank": 0, "process": 0, "gpu": "GPU-aaaa", "ordinal": 0,
                "peak_allocated": {"bytes": 1000, "time_ns": 2000000000},
                "peak_reserved": {"bytes": 2048, "time_ns": 2000000000}, "leaked_bytes": 300, "ooms": 1},
               {"rank": 1, "process": 1, "gpu": "GPU-bbbb", "ordinal": 1,
                "peak_allocated": {"bytes": 9007199254740991, "time_ns": 4000000000},
                "peak_reserved": {"bytes": 9007199254740991, "time_ns": 4000000000}, "leaked_bytes": 200,
                "ooms": 0}],
      "worst": 1, "peak_allocated_spread_bytes": 9007199254740991,
      "peak_reserved_spread_bytes": 9007199254740991, "median_peak_allocated_bytes": 1000},
    "wrong_devices": [{"process": 1, "ordinal": 0, "gpu": "GPU-aaaa", "local_ordinal": 1,
                       "peak_allocated_bytes": 512, "first_allocation_ns": 3000,
                       "first_allocation_site": "train.py:5 <module>"}],
    "leaks": [{"site_key": "k1", "site": "train.py:20 step", "bytes": 500, "count": 5, "processes": [0, 1]},
              {"site_key": "k2", "site": "</script><b>x", "bytes": 10, "count": 1, "processes": [null]}]
  })");
  const json data = fleet_report_data(two_ranks());
  EXPECT_EQ(data, expected) << data.dump(2);
  EXPECT_LE(data["ranks"]["peak_allocated_spread_bytes"].get<int64_t>(), kMaxExact);
}

TEST(FleetReportData, EmptyView) {
  const json expected = json::parse(R"({
    "format": 1, "kind": "fleet", "origin_unix_ns": "0",
    "summary": {"processes": 0, "hosts": 0, "gpus": 0, "ranks": 0, "worst_rank": null,
                "largest_combined_peak": null, "wrong_devices": 0, "leak_sites": 0},
    "processes": [], "tree": [], "gpus": [],
    "ranks": {"rows": [], "worst": null, "peak_allocated_spread_bytes": 0, "peak_reserved_spread_bytes": 0,
              "median_peak_allocated_bytes": 0},
    "wrong_devices": [], "leaks": []
  })");
  EXPECT_EQ(fleet_report_data(FleetView{}), expected);
}

// A hand-made view whose parents form a cycle (0's parent is 1, 1's parent is 0), beside a root (2) and a process
// whose parent is outside the view (3's is 9: written null, and 3 is a root). Every process is listed once: the
// roots 2 and 3 first, then the cycle entered at its lowest index, 0, with 1 under it.
TEST(FleetReportData, ParentCycleListedOnce) {
  FleetView f;
  f.processes.resize(4);
  f.parent = {1, 0, std::nullopt, 9};
  const json data = fleet_report_data(f);
  EXPECT_EQ(data["tree"], json::parse(R"([{"process": 2, "depth": 0}, {"process": 3, "depth": 0},
                                          {"process": 0, "depth": 0}, {"process": 1, "depth": 1}])"));
  EXPECT_EQ(data["processes"][3]["parent"], nullptr);
  EXPECT_EQ(data["processes"][0]["parent"], 1);
  EXPECT_EQ(data["summary"]["hosts"], 1);  // four processes of host ""
}

}  // namespace
}  // namespace memtrace
