// `memtrace summary|leaks|oom` of many traces and `memtrace merge`, as users run them, on traces built here: two
// ranks of one job sharing GPU A, rank 1 also on its own GPU B. Figures worked out in the comments.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "oom_test_events.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

constexpr uint64_t kPy = 1ull << 63;
constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
constexpr int64_t kS = 1'000'000'000;
constexpr uint64_t kT = 1'796'205'600ull * kS;  // 2026-12-02 10:00:00 UTC

proto::Record start_record(uint32_t pid, uint32_t rank, uint64_t start_unix_ns) {
  proto::Record r;
  proto::TraceStart* s = r.mutable_start();
  s->set_pid(pid);
  s->set_ppid(1);
  s->set_hostname("node1");
  s->add_argv("python");
  s->add_argv("train.py");
  s->set_start_monotonic_ns(1'000'000'000);
  s->set_start_unix_ns(start_unix_ns);
  s->set_rank(rank);
  s->set_local_rank(rank);
  s->set_world_size(2);
  return r;
}

// GPU A's UUID is 16 bytes of 0xaa, GPU B's of 0xbb.
proto::Record device_record(uint32_t ordinal, char uuid_byte) {
  proto::Record r;
  r.mutable_device()->set_ordinal(ordinal);
  r.mutable_device()->set_uuid(std::string(16, uuid_byte));
  r.mutable_device()->set_name("NVIDIA H200");
  r.mutable_device()->set_total_bytes(140 * kGiB);
  return r;
}

// Stack 10 = train.py:42 main, stack 11 = train.py:50 step.
test::TraceBuilder with_stacks(test::TraceBuilder b) {
  b.python_frame(1, "train.py", "main", 42).python_frame(2, "train.py", "step", 50);
  b.stack(10, {kPy | 1}).stack(11, {kPy | 2});
  return b;
}

// Rank 0 (pid 100, starts at kT): 1 GiB on GPU A (its device 0) at 1 s from train.py:42, never freed.
std::string rank0_trace(const std::string& path) {
  test::TraceBuilder b;
  b.record(start_record(100, 0, kT)).record(device_record(0, '\xaa'));
  b = with_stacks(b);
  b.event(test::driver_alloc(0, 0x10000000, kGiB, kS, 10)).end(1, 0).end_chunk();
  test::write_file(path, b.bytes());
  return path;
}

// Rank 1 (pid 101, starts at kT + 0.5 s): 2 GiB on GPU B (its device 1) at 1 s from train.py:50, freed at 3 s;
// 512 MiB on GPU A (its device 0) at 2 s from train.py:42, never freed: the wrong device, and a leak at the same
// line as rank 0's.
std::string rank1_trace(const std::string& path) {
  test::TraceBuilder b;
  b.record(start_record(101, 1, kT + kS / 2)).record(device_record(0, '\xaa')).record(device_record(1, '\xbb'));
  b = with_stacks(b);
  b.event(test::driver_alloc(1, 0x20000000, 2 * kGiB, kS, 11));
  b.event(test::driver_alloc(0, 0x30000000, 512 * kMiB, kS, 10));
  b.event(test::driver_free(1, 0x20000000, kS)).end(3, 0).end_chunk();
  test::write_file(path, b.bytes());
  return path;
}

struct Job {
  std::string dir, rank0, rank1;
};

Job write_job(const std::string& name) {
  Job job;
  job.dir = test::temp_path(name);
  std::filesystem::remove_all(job.dir);
  std::filesystem::create_directories(job.dir);
  job.rank0 = rank0_trace(job.dir + "/rank0.mtrace");
  job.rank1 = rank1_trace(job.dir + "/rank1.mtrace");
  return job;
}

const std::string kGpuA = "GPU-aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";
const std::string kGpuB = "GPU-bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb";

// The fleet report of the job (summary): rank 0's 1 GiB at +1 s; rank 1's 512 MiB on A at 0.5 + 2 = +2.5 s and
// 2 GiB on B at +1.5 s. Driver-level traces: reserved is what the driver holds, the same figures. Leaks: 1 GiB +
// 512 MiB at train.py:42 in both ranks.
// With the traces (`summary` of many), GPU A, shared by both ranks, has its combined peaks. Each rank ends at its
// TraceEnd (delta 0: at its last event), where its totals on A fall to 0:
//   wall     who     rank 0   rank 1    sum on A
//   +1.0 s   rank 0  1 GiB    0         1 GiB     <- combined peak allocated and reserved
//   +1.0 s   rank 0  0        0         0         (rank 0's end)
//   +2.5 s   rank 1  0        512 MiB   512 MiB
//   +3.5 s   rank 1  0        0         0         (rank 1's end, after freeing its 2 GiB on B)
// The two never held A's memory at once: the combined peak is rank 0's 1 GiB, not the sum of the peaks (1.5 GiB).
// `merge` of summaries has no traces to combine: no combined lines (combined = false).
std::string expected_report(const Job& job, bool combined) {
  const std::string combined_lines = combined
                                         ? "  combined peak allocated 1.00 GiB at +1.000 s: rank 0 (pid 100) 1.00 GiB\n"
                                           "  combined peak reserved 1.00 GiB at +1.000 s: rank 0 (pid 100) 1.00 GiB\n"
                                         : "";
  return "memtrace: 2 processes on 1 host, 2 GPUs; time 0 = 2026-12-02 10:00:00.000 UTC (the earliest start)\n"
         "\n"
         "GPU " +
         kGpuA +
         " on node1 (NVIDIA H200, 140.00 GiB): 2 processes\n"
         "  rank 0 (pid 100) as device 0: peak allocated 1.00 GiB at +1.000 s, peak reserved 1.00 GiB at +1.000 s\n"
         "  rank 1 (pid 101) as device 0: peak allocated 512.00 MiB at +2.500 s, peak reserved 512.00 MiB at "
         "+2.500 s\n"
         "  sum of their peaks: allocated 1.50 GiB, reserved 1.50 GiB (a bound: the peaks need not coincide)\n" +
         combined_lines +
         "\n"
         "GPU " +
         kGpuB +
         " on node1 (NVIDIA H200, 140.00 GiB): 1 process\n"
         "  rank 1 (pid 101) as device 1: peak allocated 2.00 GiB at +1.500 s, peak reserved 2.00 GiB at +1.500 s\n"
         "\n"
         "Ranks: 2, worst rank 1 (pid 101); peak allocated spread 1.00 GiB, median 1.00 GiB; peak reserved spread "
         "1.00 GiB\n"
         "  rank  pid      host        device  allocated   at          reserved    at          leaked      OOMs\n"
         "  0     100      node1       0       1.00 GiB    +1.000 s    1.00 GiB    +1.000 s    1.00 GiB    0\n"
         "  1     101      node1       1       2.00 GiB    +1.500 s    2.00 GiB    +1.500 s    512.00 MiB  0  <- "
         "worst\n"
         "\n"
         "WRONG DEVICE: rank 1 (pid 101) allocated 512.00 MiB on GPU 0 (" +
         kGpuA +
         "), not its local device 1: "
         "first at train.py:42 main (+2.500 s)\n"
         "\n"
         "Processes: 2 (children under their parent)\n"
         "  rank 0 (pid 100) on node1, +0.000 s to +1.000 s: python train.py  [" +
         job.rank0 +
         "]\n"
         "  rank 1 (pid 101) on node1, +0.500 s to +3.500 s: python train.py  [" +
         job.rank1 +
         "]\n"
         "\n"
         "Leak candidates merged by call site: 1 site\n"
         "  #1 1.50 GiB in 2 allocations at train.py:42 main: 2 processes (ranks 0, 1)\n";
}

TEST(FleetCli, SummaryOfTwoTracesIsTheFleetReport) {
  Job job = write_job("fleet-cli-two");
  test::MemtraceRun run = test::run_memtrace_binary("summary " + job.rank1 + " " + job.rank0);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out, expected_report(job, true));
  // The directory reads the same two traces.
  run = test::run_memtrace_binary("summary " + job.dir);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, expected_report(job, true));
}

TEST(FleetCli, SummaryJsonOfManyHasTheFleetKeys) {
  Job job = write_job("fleet-cli-json");
  nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("summary " + job.dir + " --json"));
  ASSERT_EQ(j["processes"].size(), 2u);
  EXPECT_EQ(j["processes"][1]["pid"], 101);
  EXPECT_EQ(j["processes"][1]["parent"], nullptr);
  EXPECT_EQ(j["first_start_unix_ns"], kT);
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["gpu"], kGpuA);
  EXPECT_EQ(j["gpus"][0]["sum_of_peak_allocated_bytes"], kGiB + 512 * kMiB);
  // The combined peaks of GPU A, as in expected_report's table; "process" is the index in "processes".
  const nlohmann::json rank0_alone = {{"unix_ns", kT + kS},
                                      {"allocated_bytes", kGiB},
                                      {"reserved_bytes", kGiB},
                                      {"processes",
                                       {{{"process", 0}, {"allocated_bytes", kGiB}, {"reserved_bytes", kGiB}},
                                        {{"process", 1}, {"allocated_bytes", 0}, {"reserved_bytes", 0}}}}};
  EXPECT_EQ(j["gpus"][0]["combined"],
            (nlohmann::json{{"peak_allocated", rank0_alone}, {"peak_reserved", rank0_alone}}));
  EXPECT_EQ(j["gpus"][1]["combined"], nullptr);  // GPU B: rank 1 alone
  EXPECT_EQ(j["ranks"]["worst_rank"], 1);
  EXPECT_EQ(j["ranks"]["peak_allocated_spread_bytes"], kGiB);
  ASSERT_EQ(j["wrong_devices"].size(), 1u);
  EXPECT_EQ(j["wrong_devices"][0]["pid"], 101);
  EXPECT_EQ(j["wrong_devices"][0]["first_allocation_unix_ns"], kT + 5 * kS / 2);
  ASSERT_EQ(j["leaks"].size(), 1u);
  EXPECT_EQ(j["leaks"][0]["bytes"], kGiB + 512 * kMiB);
  EXPECT_EQ(j["leaks"][0]["processes"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["unreadable"], nlohmann::json::array());
}

TEST(FleetCli, OneTracesSummaryJsonHasItsProcessEntry) {
  Job job = write_job("fleet-cli-one");
  nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("summary " + job.rank1 + " --json"));
  ASSERT_TRUE(j.contains("trace"));  // the one-trace document, with its processes list of one
  ASSERT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["pid"], 101);
  EXPECT_EQ(j["processes"][0]["rank"], 1);
  ASSERT_EQ(j["processes"][0]["devices"].size(), 2u);
  EXPECT_EQ(j["processes"][0]["devices"][1]["gpu"], kGpuB);
  EXPECT_EQ(j["processes"][0]["devices"][1]["peak_allocated"]["bytes"], 2 * kGiB);
}

TEST(FleetCli, AnUnreadableTraceAmongManyIsNamedAndTheOthersReported) {
  Job job = write_job("fleet-cli-bad");
  const std::string bad = job.dir + "/broken.mtrace";
  test::write_file(bad, "this is not a trace\n");
  test::MemtraceRun run = test::run_memtrace_binary("summary " + job.dir);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "memtrace: " + bad + ": not a memtrace trace: no memtrace header frame (at byte 0)\n");
  EXPECT_EQ(run.out, expected_report(job, true));
  run = test::run_memtrace_binary("summary " + job.rank0 + " " + job.dir + "/missing.mtrace --json");
  EXPECT_EQ(run.exit_code, 2);
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["processes"].size(), 1u);
  ASSERT_EQ(j["unreadable"].size(), 1u);
  EXPECT_EQ(j["unreadable"][0]["trace"], job.dir + "/missing.mtrace");
}

TEST(FleetCli, MergeOfTheSummariesIsTheSameReport) {
  Job job = write_job("fleet-cli-merge");
  const std::string s0 = job.dir + "/rank0.json", s1 = job.dir + "/rank1.json";
  test::write_file(s0, test::memtrace_stdout("summary " + job.rank0 + " --json"));
  test::write_file(s1, test::memtrace_stdout("summary " + job.rank1 + " --json"));
  test::MemtraceRun run = test::run_memtrace_binary("merge " + s1 + " " + s0);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, expected_report(job, false));
  // A fleet's document merges too: its processes list.
  const std::string fleet = job.dir + "/fleet.json";
  test::write_file(fleet, test::memtrace_stdout("summary " + job.dir + " --json"));
  EXPECT_EQ(test::memtrace_stdout("merge " + fleet), expected_report(job, false));
  // Not such a document: one line naming it, the others reported, exit 2.
  const std::string text = job.dir + "/notes.txt";
  test::write_file(text, "hello\n");
  run = test::run_memtrace_binary("merge " + s0 + " " + text + " " + s1);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind("memtrace: " + text + ": not JSON: ", 0), 0u) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
  EXPECT_EQ(run.out, expected_report(job, false));
  test::write_file(text, "{\"trace\": {}}");
  run = test::run_memtrace_binary("merge " + text);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "memtrace: " + text + ": not a summary --json document: no processes list\n");
  // A directory, and a trace where a summary belongs: said in the project's words.
  run = test::run_memtrace_binary("merge " + job.dir);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "memtrace: " + job.dir +
                         ": is a directory: merge reads the files `memtrace summary TRACE --json` "
                         "wrote\n");
  run = test::run_memtrace_binary("merge " + job.rank0);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "memtrace: " + job.rank0 +
                         ": a trace, not a summary: merge reads what `memtrace summary TRACE "
                         "--json` writes\n");
  // A fleet summary that lists a trace it could not read: the trace is said again, exit 2.
  const std::string with_missing = job.dir + "/with-missing.json";
  nlohmann::json document = nlohmann::json::parse(test::read_file(s0));
  document["unreadable"] = {{{"trace", "rank9.mtrace"}, {"error", "not a memtrace trace"}}};
  test::write_file(with_missing, document.dump());
  run = test::run_memtrace_binary("merge " + with_missing);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "memtrace: rank9.mtrace: not a memtrace trace (unreadable in " + with_missing + ")\n");
  // The same summary twice: one process, said once.
  run = test::run_memtrace_binary("merge " + s0 + " " + s0);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("memtrace: 1 process on 1 host"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  counted once: 1 input of a process already read (the same host, pid and start): " +
                         job.rank0 + "\n"),
            std::string::npos)
      << run.out;
}

TEST(FleetCli, LeaksOfManyMergesThenListsEachProcess) {
  Job job = write_job("fleet-cli-leaks");
  EXPECT_EQ(test::memtrace_stdout("leaks " + job.dir),
            "memtrace: 2 processes on 1 host, 2 GPUs; time 0 = 2026-12-02 10:00:00.000 UTC (the earliest start)\n"
            "\n"
            "Leak candidates merged by call site: 1 site\n"
            "  #1 1.50 GiB in 2 allocations at train.py:42 main: 2 processes (ranks 0, 1)\n"
            "\n"
            "Leak candidates per process\n"
            "  rank 0 (pid 100) [" +
                job.rank0 +
                "]: 1.00 GiB at 1 site\n"
                "    1.00 GiB in 1 allocation at train.py:42 main\n"
                "  rank 1 (pid 101) [" +
                job.rank1 +
                "]: 512.00 MiB at 1 site\n"
                "    512.00 MiB in 1 allocation at train.py:42 main\n");
}

TEST(FleetCli, OomOfManyAddsTheOomReportOfEachProcessThatHadOne) {
  Job job = write_job("fleet-cli-oom");
  // Rank 1 again, with a failed cudaMalloc of 200 GiB on its device 1 at 3.5 s (after the free).
  test::TraceBuilder b;
  b.record(start_record(101, 1, kT + kS / 2)).record(device_record(0, '\xaa')).record(device_record(1, '\xbb'));
  b = with_stacks(b);
  b.event(test::driver_alloc(1, 0x20000000, 2 * kGiB, kS, 11));
  b.event(test::driver_alloc(0, 0x30000000, 512 * kMiB, kS, 10));
  b.event(test::driver_free(1, 0x20000000, kS));
  b.event(test::oom::cuda_malloc_oom(1, 200 * kGiB, 139 * kGiB, 140 * kGiB, kS / 2, 11)).end(4, 0).end_chunk();
  test::write_file(job.rank1, b.bytes());
  test::MemtraceRun run = test::run_memtrace_binary("oom " + job.dir);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string single = test::memtrace_stdout("oom " + job.rank1);
  const std::string header = "\nrank 1, pid 101: " + job.rank1 + "\n";
  const size_t at = run.out.find(header);
  ASSERT_NE(at, std::string::npos) << run.out;
  EXPECT_EQ(run.out.substr(at + header.size()), single);  // rank 0 had none: no report of it
  EXPECT_EQ(run.out.find("pid 100: "), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("oom " + job.dir + " --json"));
  ASSERT_EQ(j["ooms"].size(), 1u);
  EXPECT_EQ(j["ooms"][0]["process"], 1);
  EXPECT_EQ(j["ooms"][0]["report"]["oom_count"], 1);
  EXPECT_EQ(j["ranks"]["rows"][1]["ooms"], 1);
}

}  // namespace
}  // namespace memtrace
