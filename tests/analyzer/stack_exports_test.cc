// `memtrace export --format speedscope` (export/speedscope.h) and `--format folded` (export/folded.h), exactly, on
// the two-device trace of stack_export_traces.h: one device with PyTorch's allocator (allocated = its blocks), one
// with plain cudaMalloc (allocated = driver memory), stacks of Python frames, one with ';' and a newline in its text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "stack_export_traces.h"

namespace memtrace {
namespace {

using test::run_memtrace_binary;

std::string two_device_trace() {
  const std::string path = test::temp_path("stacks.mtrace");
  test::write_file(path, test::two_device_trace_bytes());
  return path;
}

TEST(FoldedExport, BytesLiveAtEachDevicesPeakOneLinePerStack) {
  const std::string trace = two_device_trace(), folded = test::temp_path("stacks.folded");
  test::MemtraceRun r = run_memtrace_binary("export --format folded " + trace + " -o " + folded);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(test::read_file(folded),
            "device 1;train.py:10 main 8192\n"
            "device 0;train.py:10 main 3000\n"
            "device 0;train.py:10 main;model.py:20 forward 1000\n"
            "device 0;train.py:10 main;a,b.py:7 odd name 500\n"
            "device 1;[no stack] 100\n");
}

// A C++ program's stack: its native frames root first, each as the symbolizer names it (outside every module: the
// address); an id no Stack record defines is "[no stack]". Both allocations live at the peak (5120 B).
TEST(FoldedExport, NativeFramesRootFirstAndUndefinedStacks) {
  const std::string trace = test::temp_path("native.mtrace"), folded = test::temp_path("native.folded");
  test::write_file(trace, test::native_trace_bytes());
  test::MemtraceRun r = run_memtrace_binary("export --format folded " + trace + " -o " + folded);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_file(folded),
            "device 0;0x400f00;0x401100;0x401234 4096\n"
            "device 0;[no stack] 1024\n");
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
      {"type": "sampled", "name": "device 0: live at exit (leak candidates)", "unit": "bytes",
       "startValue": 0, "endValue": 3500, "samples": [[0, 1], [0, 2]], "weights": [3000, 500]},
      {"type": "sampled", "name": "device 1: live at peak allocated (0.008 s)", "unit": "bytes",
       "startValue": 0, "endValue": 8292, "samples": [[0], [3]], "weights": [8192, 100]},
      {"type": "sampled", "name": "device 1: live at exit (leak candidates)", "unit": "bytes",
       "startValue": 0, "endValue": 8192, "samples": [[0]], "weights": [8192]},
      {"type": "sampled", "name": "all devices: every allocation (alloc_space)", "unit": "bytes",
       "startValue": 0, "endValue": 14792, "samples": [[0], [0, 1], [0, 2], [3]],
       "weights": [11192, 3000, 500, 100]}]})json";
  // Byte for byte: compact JSON in this key order, and a newline.
  EXPECT_EQ(test::read_file(file), nlohmann::ordered_json::parse(expected).dump() + "\n");
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
