// `memtrace oom` as users run it: the text report, the --json keys, a trace without failures, bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "analysis_trace.h"
#include "oom_test_events.h"

namespace memtrace {
namespace {

using namespace test::oom;

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

CliResult run_oom(const std::string& args) {
  std::string out = test::temp_path("oom-cli.out"), err = test::temp_path("oom-cli.err");
  int status = std::system((std::string(MEMTRACE_BIN) + " oom " + args + " >" + out + " 2>" + err).c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = test::read_file(out);
  r.err = test::read_file(err);
  return r;
}

// 40 MiB held (stack 11) on a 64 MiB device when 100 MiB are asked for (stack 10) at 2 ms, 24 MiB free;
// right after, the hook's sample: this process 41 MiB, other processes 0.
std::string request_too_large_trace() {
  test::TraceBuilder b;
  b.start().python_frame(1, "train.py", "train_step", 42).python_frame(2, "train.py", "<module>", 50);
  b.stack(10, {test::kPy | 1, test::kPy | 2}).stack(11, {test::kPy | 2}).end_chunk();
  b.event(test::driver_alloc(0, 0x10000000, 40 * kMiB, 1'000'000, 11));
  b.event(cuda_malloc_oom(0, 100 * kMiB, 24 * kMiB, 64 * kMiB, 1'000'000, 10));
  b.event(device_usage(proto::CUDA_MALLOC, 0, 24 * kMiB, 64 * kMiB, 41 * kMiB, 0)).end_chunk();
  std::string path = test::temp_path("oom-too-large.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

TEST(OomCli, TraceWithoutFailureSaysSoAndSucceeds) {
  std::string path = test::temp_path("oom-none.mtrace");
  test::write_file(path, test::small_torch_trace().bytes());
  CliResult r = run_oom(path);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "no failed allocation in " + path + "\n");
  EXPECT_EQ(r.err, "");
  r = run_oom(path + " --json");
  EXPECT_EQ(r.exit_code, 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["oom_count"], 0);
  EXPECT_EQ(j["ooms"], nlohmann::json::array());
}

TEST(OomCli, BadFileIsOneErrorLineAndExitCode2) {
  std::string path = test::temp_path("oom-not-a-trace.mtrace");
  test::write_file(path, "this is not a trace\n");
  CliResult r = run_oom(path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": not a memtrace trace: no memtrace header frame (at byte 0)\n");
  EXPECT_EQ(r.out, "");
}

TEST(OomCli, TextReportHasTheFactsAndTheDiagnosis) {
  std::string path = request_too_large_trace();
  CliResult r = run_oom(path);
  EXPECT_EQ(r.exit_code, 0);
  std::string expected_tail =
      "\nFailed allocations: 1\n"
      "\nOOM #1: device 0 at 0.002 s, CUDA_MALLOC: requested 100.00 MiB (104,857,600 B)\n"
      "  call site:\n"
      "    > train.py:42 train_step\n"
      "    > train.py:50 <module>\n"
      "  device:            free 24.00 MiB (25,165,824 B) of 64.00 MiB (67,108,864 B)\n"
      "  this process:      allocated 40.00 MiB (41,943,040 B), reserved 40.00 MiB (41,943,040 B), driver 40.00 MiB "
      "(41,943,040 B)\n"
      "  device sample:     right after the failure: free 24.00 MiB (25,165,824 B) of 64.00 MiB (67,108,864 B); "
      "NVML: this process 41.00 MiB (42,991,616 B), other processes 0 B\n"
      "  largest free block inside reserved memory: not known (no allocator segments in the trace); reserved but "
      "unallocated 0 B\n"
      "  live at the failure: 1 call site\n"
      "    #1 40.00 MiB (41,943,040 B) in 1 allocation\n"
      "    > train.py:50 <module>\n"
      "  diagnosis:\n"
      "    1. the request alone is larger than the device: 100.00 MiB requested, the device has 64.00 MiB in all\n";
  ASSERT_GE(r.out.size(), expected_tail.size());
  EXPECT_EQ(r.out.substr(r.out.size() - expected_tail.size()), expected_tail) << r.out;
  EXPECT_EQ(r.out.rfind("memtrace: " + path + "\n", 0), 0u) << r.out;
}

// 105 failures (one thread, driver level): 100 described, 5 counted.
TEST(OomCli, FailuresBeyondTheHundredthAreCounted) {
  test::TraceBuilder b;
  b.start().end_chunk();
  for (uint64_t i = 1; i <= 105; ++i) b.event(cuda_malloc_oom(0, i * kMiB, 0, 64 * kMiB, 1'000'000));
  b.end_chunk();
  std::string path = test::temp_path("oom-many.mtrace");
  test::write_file(path, b.bytes());
  CliResult r = run_oom(path);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("\nFailed allocations: 105 (the first 100 in detail, 5 more only counted)\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nOOM #100: device 0 at 0.100 s, CUDA_MALLOC: requested 100.00 MiB (104,857,600 B)\n"),
            std::string::npos);
  EXPECT_EQ(r.out.find("OOM #101"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(run_oom(path + " --json").out);
  EXPECT_EQ(j["oom_count"], 105);
  EXPECT_EQ(j["detailed_count"], 100);
  EXPECT_EQ(j["ooms"].size(), 100u);
}

TEST(OomCli, JsonHasTheDocumentedKeys) {
  CliResult r = run_oom(request_too_large_trace() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["oom_count"], 1);
  EXPECT_EQ(j["detailed_count"], 1);
  ASSERT_EQ(j["ooms"].size(), 1u);
  const nlohmann::json& o = j["ooms"][0];
  std::vector<std::string> keys;
  for (const auto& [key, value] : o.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"allocated_bytes",
                                            "allocator_layer",
                                            "api",
                                            "device",
                                            "device_free_bytes",
                                            "device_total_bytes",
                                            "device_usage",
                                            "diagnoses",
                                            "driver_attempts",
                                            "driver_bytes",
                                            "fragmentation",
                                            "frames",
                                            "growing_call_site_count",
                                            "growing_call_sites",
                                            "layer",
                                            "live_call_site_count",
                                            "live_call_sites",
                                            "native_frames_cut",
                                            "number",
                                            "python_frames_cut",
                                            "requested_bytes",
                                            "reserved_bytes",
                                            "result",
                                            "tid",
                                            "time_s"}));
  EXPECT_EQ(o["number"], 1);
  EXPECT_EQ(o["requested_bytes"], 100 * kMiB);
  EXPECT_EQ(o["device_free_bytes"], 24 * kMiB);
  EXPECT_EQ(o["device_total_bytes"], 64 * kMiB);
  EXPECT_EQ(o["allocated_bytes"], 40 * kMiB);
  EXPECT_EQ(o["api"], "CUDA_MALLOC");
  EXPECT_EQ(o["frames"][0]["function"], "train_step");
  EXPECT_EQ(o["native_frames_cut"], false);  // the trace's stacks carry no cut marks
  EXPECT_EQ(o["python_frames_cut"], false);
  // accounted = this process's driver total, 40 MiB; NVML's 41 MiB less that = 1 MiB unattributed.
  EXPECT_EQ(o["device_usage"], (nlohmann::json{{"time_s", 0.002},
                                               {"api", "CUDA_MALLOC"},
                                               {"after_oom", true},
                                               {"device_free_bytes", 24 * kMiB},
                                               {"device_total_bytes", 64 * kMiB},
                                               {"process_used_bytes", 41 * kMiB},
                                               {"other_processes_used_bytes", 0},
                                               {"accounted_bytes", 40 * kMiB},
                                               {"context_and_unattributed_bytes", kMiB}}));
  EXPECT_EQ(o["fragmentation"], (nlohmann::json{{"reserved_minus_allocated_bytes", 0},
                                                {"segments_known", false},
                                                {"segment_count", nullptr},
                                                {"largest_free_block_bytes", nullptr}}));
  EXPECT_EQ(o["live_call_sites"][0]["bytes"], 40 * kMiB);
  EXPECT_EQ(o["live_call_sites"][0]["count"], 1);
  EXPECT_EQ(o["growing_call_site_count"], 0);
  EXPECT_EQ(o["diagnoses"], (nlohmann::json::array({{{"cause", "request_exceeds_device"},
                                                     {"text",
                                                      "the request alone is larger than the device: 100.00 "
                                                      "MiB requested, the device has 64.00 MiB in all"}}})));
}

}  // namespace
}  // namespace memtrace
