// `memtrace export --format speedscope` (export/speedscope.h) and `--format folded` (export/folded.h), exactly, on
// one trace built here: two devices, one with PyTorch's allocator (allocated = its blocks), one with plain
// cudaMalloc (allocated = driver memory), stacks of Python frames, one with ';' and a newline in its text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "stacks/stack_table.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::run_memtrace_binary;
using test::TraceBuilder;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr uint64_t kSegment = 64 << 20, kMs = 1'000'000;

// Python frames 1 train.py:10 main, 2 model.py:20 forward, 3 "a;b.py":7 "odd\nname". Stacks (innermost first):
// 11 = forward < main, 12 = main, 13 = odd name < main. Events, 1 ms apart from 1 ms on:
//   device 0: a 64 MiB cudaMalloc segment (no stack), PyTorch blocks 1000 B (s11), 3000 B (s12), 500 B (s13)
//             -> peak allocated 4500 B at 4 ms; then the 3000 B block freed and 2000 B (s11) allocated (3500 B).
//   device 1: cudaMalloc 8192 B (s12), 100 B (no stack) -> peak 8292 B at 8 ms; then the 100 B freed.
// Live at exit (the end): device 0's blocks of s11 (1000 + 2000 B) and s13 (500 B); device 1's 8192 B (s12). The
// segment is not a leak candidate (PyTorch's cache: reserved, not allocated).
// Every allocation of the allocated kind: s12 3000 + 8192 = 11192, s11 3000, s13 500, no stack 100 (the segment is
// not of that kind on device 0, which has PyTorch's blocks).
std::string two_device_trace() {
  TraceBuilder b;
  b.start();
  b.python_frame(1, "train.py", "main", 10).python_frame(2, "model.py", "forward", 20);
  b.python_frame(3, "a;b.py", "odd\nname", 7);
  b.stack(11, {kPythonFrameBit | 2, kPythonFrameBit | 1});
  b.stack(12, {kPythonFrameBit | 1});
  b.stack(13, {kPythonFrameBit | 3, kPythonFrameBit | 1});
  b.event(test::driver_alloc(0, 0x10000000, kSegment, kMs));
  b.event(test::torch_event(proto::ALLOC, 0, 0x10000000, 1000, 1000, kSegment, kMs, 11));
  b.event(test::torch_event(proto::ALLOC, 0, 0x10001000, 3000, 4000, kSegment, kMs, 12));
  b.event(test::torch_event(proto::ALLOC, 0, 0x10002000, 500, 4500, kSegment, kMs, 13));
  b.event(test::torch_event(proto::FREE, 0, 0x10001000, 3000, 1500, kSegment, kMs));
  b.event(test::torch_event(proto::ALLOC, 0, 0x10003000, 2000, 3500, kSegment, kMs, 11));
  b.event(test::driver_alloc(1, 0x20000000, 8192, kMs, 12));
  b.event(test::driver_alloc(1, 0x20010000, 100, kMs));
  b.event(test::driver_free(1, 0x20010000, kMs));
  b.end(9, 0).end_chunk();
  const std::string path = test::temp_path("stacks.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

TEST(FoldedExport, BytesLiveAtEachDevicesPeakOneLinePerStack) {
  const std::string trace = two_device_trace(), folded = test::temp_path("stacks.folded");
  test::MemtraceRun r = run_memtrace_binary("export --format folded " + trace + " -o " + folded);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(read_file(folded),
            "device 1;train.py:10 main 8192\n"
            "device 0;train.py:10 main 3000\n"
            "device 0;train.py:10 main;model.py:20 forward 1000\n"
            "device 0;train.py:10 main;a,b.py:7 odd name 500\n"
            "device 1;[no stack] 100\n");
}

TEST(SpeedscopeExport, PeakAndExitPerDeviceThenEveryAllocation) {
  const std::string trace = two_device_trace(), file = test::temp_path("stacks.speedscope.json");
  test::MemtraceRun r = run_memtrace_binary("export --format speedscope " + trace + " -o " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  // Frames in order of first use: device 0's peak sites largest first (s12, s11, s13), then device 1's no stack.
  const std::string expected = R"json({
    "$schema": "https://www.speedscope.app/file-format-schema.json",
    "name": "stacks.mtrace",
    "exporter": "memtrace )json" MEMTRACE_VERSION R"json(",
    "activeProfileIndex": 0,
    "shared": {"frames": [
      {"name": "train.py:10 main", "file": "train.py", "line": 10},
      {"name": "model.py:20 forward", "file": "model.py", "line": 20},
      {"name": "a;b.py:7 odd\nname", "file": "a;b.py", "line": 7},
      {"name": "[no stack]"}]},
    "profiles": [
      {"type": "sampled", "name": "device 0: live at peak allocated (0.004 s)", "unit": "bytes",
       "startValue": 0, "endValue": 4500, "samples": [[0], [0, 1], [0, 2]], "weights": [3000, 1000, 500]},
      {"type": "sampled", "name": "device 0: live at exit", "unit": "bytes",
       "startValue": 0, "endValue": 3500, "samples": [[0, 1], [0, 2]], "weights": [3000, 500]},
      {"type": "sampled", "name": "device 1: live at peak allocated (0.008 s)", "unit": "bytes",
       "startValue": 0, "endValue": 8292, "samples": [[0], [3]], "weights": [8192, 100]},
      {"type": "sampled", "name": "device 1: live at exit", "unit": "bytes",
       "startValue": 0, "endValue": 8192, "samples": [[0]], "weights": [8192]},
      {"type": "sampled", "name": "all devices: every allocation (alloc_space)", "unit": "bytes",
       "startValue": 0, "endValue": 14792, "samples": [[0], [0, 1], [0, 2], [3]],
       "weights": [11192, 3000, 500, 100]}]})json";
  // Byte for byte: compact JSON in this key order, and a newline.
  EXPECT_EQ(read_file(file), nlohmann::ordered_json::parse(expected).dump() + "\n");
}

TEST(StackExports, ATraceThatDoesNotReadLeavesNoFile) {
  const std::string junk = test::temp_path("junk-stacks.mtrace"), out = test::temp_path("junk.folded");
  test::write_file(junk, "not a trace");
  for (const char* format : {"folded", "speedscope"}) {
    test::MemtraceRun r = run_memtrace_binary(std::string("export --format ") + format + " " + junk + " -o " + out);
    EXPECT_EQ(r.exit_code, 2) << format;
    EXPECT_NE(r.err.find(junk), std::string::npos) << r.err;
    EXPECT_FALSE(std::ifstream(out).good()) << format;
  }
}

}  // namespace
}  // namespace memtrace
