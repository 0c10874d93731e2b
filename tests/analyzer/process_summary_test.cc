// One process's summary for the many-process views (fleet/process_summary.h), its JSON both ways, and reading many
// traces (fleet/read_many.h). Traces built by hand; every figure worked out below.
#include <gtest/gtest.h>

#include <filesystem>

#include "analysis/analysis.h"
#include "fleet/process_summary.h"
#include "fleet/read_many.h"
#include "stacks/frames.h"
#include "stacks/stack_table.h"
#include "stacks/symbolizer.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

constexpr uint64_t kUnix = 1'700'000'000'000'000'000ull;  // the start's CLOCK_REALTIME

proto::Record start_of(uint32_t pid, uint32_t ppid, std::optional<uint32_t> rank) {
  proto::Record r;
  proto::TraceStart* s = r.mutable_start();
  s->set_pid(pid);
  s->set_ppid(ppid);
  s->set_hostname("node0");
  s->set_start_monotonic_ns(1'000'000'000);
  s->set_start_unix_ns(kUnix);
  s->add_argv("python");
  s->add_argv("train.py");
  if (rank) {
    s->set_rank(*rank);
    s->set_local_rank(*rank);
    s->set_world_size(2);
  }
  s->set_job_id("77");
  return r;
}

proto::Record device_record(uint32_t ordinal) {
  proto::Record r;
  std::string uuid;
  for (int i = 0; i < 16; ++i) uuid += char(i + 16 * ordinal);
  r.mutable_device()->set_ordinal(ordinal);
  r.mutable_device()->set_uuid(uuid);
  r.mutable_device()->set_name("NVIDIA H200");
  r.mutable_device()->set_total_bytes(1000);
  return r;
}

proto::Event usage(int32_t device, uint64_t free, uint64_t total, uint64_t process, uint64_t others, int64_t delta) {
  proto::Event e = test::make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, device, 0, 0, delta);
  e.set_device_free_bytes(free);
  e.set_device_total_bytes(total);
  e.set_process_used_bytes(process);
  e.set_other_processes_used_bytes(others);
  return e;
}

// Rank 1 (pid 100, parent 1): on device 0 at t = 1 us 100 B and at 2 us 50 B from train.py:42 (under a library
// frame), the 100 B freed at 3 us; an NVML sample at 4 us (1000 total, 400 free: 600 used; 300 ours, 200 others'),
// the end at 5 us. Peak 150 B at 2 us; 50 B at the end, live at exit: a leak candidate of 1 allocation.
std::string rank_trace(const std::string& name) {
  const uint64_t py = kPythonFrameBit;
  test::TraceBuilder b;
  b.record(start_of(100, 1, 1u))
      .python_frame(1, "/work/train.py", "main", 42)
      .python_frame(2, "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "_call_impl", 10)
      .stack(1, {py | 2, py | 1})
      .record(device_record(0))
      .event(test::driver_alloc(0, 0x1000, 100, 1000, 1))
      .event(test::driver_alloc(0, 0x2000, 50, 1000, 1))
      .event(test::driver_free(0, 0x1000, 1000))
      .event(usage(0, 400, 1000, 300, 200, 1000))
      .end(4, 1000)
      .end_chunk();
  const std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  return path;
}

ProcessSummary summarize(const std::string& path) {
  std::unique_ptr<Analysis> a = analyze_trace(path, false);
  Symbolizer symbolizer(a->stacks.modules());
  FrameResolver resolver(a->stacks, symbolizer);
  return summarize_process(*a, resolver, 10);
}

TEST(ProcessSummary, FiguresOfOneRank) {
  const std::string path = rank_trace("summary-rank.mtrace");
  ProcessSummary p = summarize(path);
  EXPECT_EQ(p.trace, path);
  EXPECT_EQ(p.pid, 100u);
  EXPECT_EQ(p.ppid, 1u);
  EXPECT_EQ(p.host, "node0");
  EXPECT_EQ(p.rank, 1u);
  EXPECT_EQ(p.local_rank, 1u);
  EXPECT_EQ(p.world_size, 2u);
  EXPECT_EQ(p.job_id, "77");
  EXPECT_EQ(p.argv, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(p.start_unix_ns, kUnix);
  EXPECT_EQ(p.end_unix_ns, kUnix + 5000);
  EXPECT_FALSE(p.truncated);
  ASSERT_EQ(p.devices.size(), 1u);
  const ProcessDevice& d = p.devices[0];
  EXPECT_EQ(d.ordinal, 0);
  EXPECT_EQ(d.gpu, "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
  EXPECT_EQ(d.name, "NVIDIA H200");
  EXPECT_EQ(d.total_bytes, 1000u);
  EXPECT_EQ(d.peak_allocated, (TimedBytes{150, kUnix + 2000}));
  EXPECT_EQ(d.peak_reserved, (TimedBytes{150, kUnix + 2000}));  // no allocator layer: the driver's
  EXPECT_EQ(d.final_allocated_bytes, 50u);
  EXPECT_EQ(d.final_reserved_bytes, 50u);
  EXPECT_EQ(d.allocations, 2u);
  EXPECT_EQ(d.first_allocation_unix_ns, kUnix + 1000);
  EXPECT_EQ(d.first_allocation_site, "train.py:42 main");  // the user's frame, not the library's inside it
  EXPECT_EQ(d.ooms, 0u);
  EXPECT_EQ(d.samples, (std::vector<DeviceSample>{{kUnix + 4000, 600, 300, 200}}));
  ASSERT_EQ(p.leaks.size(), 1u);
  EXPECT_EQ(p.leaks[0].device, 0);
  EXPECT_EQ(p.leaks[0].site, "train.py:42 main");
  EXPECT_EQ(p.leaks[0].site_key,
            "py:/usr/lib/python3/dist-packages/torch/nn/modules/module.py:10 _call_impl | py:/work/train.py:42 main");
  EXPECT_EQ(p.leaks[0].bytes, 50u);
  EXPECT_EQ(p.leaks[0].count, 1u);
}

// The totals are over every leak candidate, however few sites are kept: --top never changes a figure.
TEST(ProcessSummary, LeakTotalsDoNotDependOnTheSitesKept) {
  const std::string path = rank_trace("summary-top.mtrace");
  std::unique_ptr<Analysis> a = analyze_trace(path, false);
  Symbolizer symbolizer(a->stacks.modules());
  FrameResolver resolver(a->stacks, symbolizer);
  ProcessSummary none = summarize_process(*a, resolver, 0);
  EXPECT_TRUE(none.leaks.empty());
  EXPECT_EQ(none.leaked_bytes, 50u);
  EXPECT_EQ(none.leak_sites, 1u);
  ProcessSummary all = summarize_process(*a, resolver, kLeakSitesKept);
  EXPECT_EQ(all.leaks.size(), 1u);
  EXPECT_EQ(all.leaked_bytes, 50u);
}

// A hostile trace's times past 2^63 - 1 ns are held there (never read back as a wrapped negative figure).
TEST(ProcessSummary, WallClockTimesStopAtInt64Max) {
  test::TraceBuilder b;
  proto::Record start = start_of(5, 1, std::nullopt);
  start.mutable_start()->set_start_unix_ns(uint64_t(INT64_MAX) - 1000);
  b.record(start).record(device_record(0)).event(test::driver_alloc(0, 0x1000, 100, 5000)).end(1, 0).end_chunk();
  const std::string path = test::temp_path("summary-late.mtrace");
  test::write_file(path, b.bytes());
  ProcessSummary p = summarize(path);
  EXPECT_EQ(p.start_unix_ns, uint64_t(INT64_MAX) - 1000);
  EXPECT_EQ(p.end_unix_ns, uint64_t(INT64_MAX));
  EXPECT_EQ(p.devices[0].peak_allocated, (TimedBytes{100, uint64_t(INT64_MAX)}));
}

TEST(ProcessSummary, JsonReadsBackEqual) {
  ProcessSummary p = summarize(rank_trace("summary-json.mtrace"));
  p.devices[0].nvml_other_pids = {7, 9};
  const nlohmann::json j = process_summary_json(p);
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["devices"][0]["samples"], nlohmann::json::parse("[[1700000000000004000, 600, 300, 200]]"));
  EXPECT_EQ(process_summary_from_json(j), p);
  // Through text, as `merge` reads a file.
  EXPECT_EQ(process_summary_from_json(nlohmann::json::parse(j.dump())), p);
  ProcessSummary no_rank = p;
  no_rank.rank.reset();
  EXPECT_TRUE(process_summary_json(no_rank)["rank"].is_null());
  EXPECT_EQ(process_summary_from_json(process_summary_json(no_rank)), no_rank);
}

// An NvmlProcesses record of `device` listing `pids` (proto/memtrace.proto), each with 10 B.
proto::Record nvml_processes(uint32_t device, const std::vector<uint32_t>& pids) {
  proto::Record r;
  r.mutable_nvml_processes()->set_device(device);
  for (uint32_t pid : pids) {
    proto::NvmlProcess* p = r.mutable_nvml_processes()->add_processes();
    p->set_pid(pid);
    p->set_used_bytes(10);
  }
  return r;
}

// A process on devices 0 and 1 (100 B each); NVML listed pids 4242 and 7 beside it on device 0, then only 7, and
// nobody on device 1 (an empty list, as the tracer writes when everyone left); device 2 was listed (pid 5) but the
// process made no event on it, so it is no device of the process.
TEST(ProcessSummary, NvmlOtherPidsPerDeviceOverTheTrace) {
  test::TraceBuilder b;
  b.record(start_of(100, 1, 0u))
      .record(device_record(0))
      .record(device_record(1))
      .event(test::driver_alloc(0, 0x1000, 100, 1000))
      .record(nvml_processes(0, {7, 4242}))
      .event(usage(0, 400, 1000, 300, 20, 1000))
      .event(test::driver_alloc(1, 0x2000, 100, 1000))
      .record(nvml_processes(1, {}))
      .event(usage(1, 400, 1000, 300, 0, 1000))
      .record(nvml_processes(0, {7}))
      .event(usage(0, 400, 1000, 300, 10, 1000))
      .record(nvml_processes(2, {5}))
      .end(5, 1000)
      .end_chunk();
  const std::string path = test::temp_path("summary-nvml-pids.mtrace");
  test::write_file(path, b.bytes());
  ProcessSummary p = summarize(path);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[0].ordinal, 0);
  EXPECT_EQ(p.devices[0].nvml_other_pids, (std::vector<uint32_t>{7, 4242}));
  EXPECT_EQ(p.devices[1].ordinal, 1);
  EXPECT_EQ(p.devices[1].nvml_other_pids, std::vector<uint32_t>{});
  const nlohmann::json j = process_summary_json(p);
  EXPECT_EQ(j["devices"][0]["nvml_other_pids"], nlohmann::json::parse("[7, 4242]"));
  EXPECT_EQ(process_summary_from_json(j), p);
}

std::string error_of(const nlohmann::json& j) {
  try {
    process_summary_from_json(j);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProcessSummary, JsonErrorsNameWhatIsWrong) {
  const nlohmann::json good = process_summary_json(summarize(rank_trace("summary-errors.mtrace")));
  const std::string trace = good["trace"];
  nlohmann::json j = good;
  j.erase("pid");
  EXPECT_EQ(error_of(j), "the process of " + trace + " has no \"pid\"");
  j = good;
  j["pid"] = -1;
  EXPECT_EQ(error_of(j), "the process of " + trace + "'s \"pid\" is not a whole number >= 0");
  j = good;
  j["pid"] = 1ull << 40;
  EXPECT_EQ(error_of(j), "the process of " + trace + "'s \"pid\" is larger than 2^32 - 1");
  j = good;
  j["devices"][0]["samples"][0] = {1, 2, 3};
  EXPECT_EQ(error_of(j), "the process of " + trace +
                             "'s device 0's sample 0 is not [unix_ns, used_bytes, process_used_bytes, "
                             "other_processes_used_bytes]");
  EXPECT_EQ(error_of(nlohmann::json::array()), "the process is not an object");
}

TEST(ReadMany, ExpandsDirectoriesAndReadsInParallel) {
  const std::string dir = test::temp_path("read-many");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string a = rank_trace("read-many/a.mtrace"), b = rank_trace("read-many/b.1.mtrace");
  test::write_file(dir + "/c.mtrace", "not a trace");
  test::write_file(dir + "/notes.txt", "not named as a trace");
  std::vector<std::string> traces = expand_trace_args({dir, a});  // `a` named twice: read once
  ASSERT_EQ(traces, (std::vector<std::string>{a, b, dir + "/c.mtrace"}));
  ReadManyResult r = read_processes(traces, ReadManyOptions{.threads = 2});
  ASSERT_EQ(r.processes.size(), 2u);
  EXPECT_EQ(r.processes[0].trace, a);
  EXPECT_EQ(r.processes[1].trace, b);
  EXPECT_EQ(r.processes[1].devices[0].peak_allocated.bytes, 150u);
  ASSERT_EQ(r.unreadable.size(), 1u);
  EXPECT_EQ(r.unreadable[0].trace, dir + "/c.mtrace");
  EXPECT_FALSE(r.unreadable[0].error.empty());
}

TEST(ReadMany, ArgumentsThatNameNoTrace) {
  const std::string empty = test::temp_path("read-many-empty");
  std::filesystem::remove_all(empty);
  std::filesystem::create_directories(empty);
  EXPECT_THROW(
      {
        try {
          expand_trace_args({empty});
        } catch (const TraceArgError& e) {
          EXPECT_EQ(std::string(e.what()), empty + ": no .mtrace files in it");
          throw;
        }
      },
      TraceArgError);
  EXPECT_THROW(
      {
        try {
          expand_trace_args({empty + "/missing.mtrace"});
        } catch (const TraceArgError& e) {
          EXPECT_EQ(std::string(e.what()), empty + "/missing.mtrace: no such file or directory");
          throw;
        }
      },
      TraceArgError);
}

}  // namespace
}  // namespace memtrace
