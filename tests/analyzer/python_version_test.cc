// The CPython whose frames a trace holds (TraceStart.python_frames, its PY_VERSION_HEX), as every report that
// shows the trace's start prints it: the text overview's "python:" line and --json's trace.python_version.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "oom_test_events.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

// A trace of one 1 MiB cudaMalloc on device 0, then a failed 2 GiB one (so that `memtrace oom` prints its
// report, overview included), and its TraceEnd; its start says `python_hex` (0: no Python frames read) and
// the default depths, 32 native frames and 16 on threads with Python frames.
std::string trace_with_python(uint32_t python_hex, const std::string& name) {
  test::TraceBuilder b;
  proto::Record start;
  start.mutable_start()->set_pid(4242);
  start.mutable_start()->set_start_monotonic_ns(1'000'000'000);
  start.mutable_start()->add_argv("python3");
  start.mutable_start()->add_argv("train.py");
  start.mutable_start()->set_max_native_frames(32);
  start.mutable_start()->set_max_native_frames_python(16);
  start.mutable_start()->set_python_frames(python_hex);
  b.record(start)
      .event(test::driver_alloc(0, 0x7f0000000000, test::oom::kMiB))
      .event(test::oom::cuda_malloc_oom(0, 2048 * test::oom::kMiB, 1 * test::oom::kMiB, 4096 * test::oom::kMiB))
      .end(2, 0)
      .end_chunk();
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  return path;
}

// The overview: everything a text report prints before its first empty line.
std::string overview(const std::string& command, const std::string& path) {
  std::string text = test::memtrace_stdout(command + " " + path);
  return text.substr(0, text.find("\n\n") + 1);
}

// 3 << 24 | 13 << 16 | 0 << 8 | 0xC << 4 | 1: 3.13.0, release candidate 1.
constexpr uint32_t kPython3130rc1 = 0x030D00C1;

TEST(PythonVersion, EveryTextReportNamesTheCPythonWhoseFramesWereRead) {
  const std::string path = trace_with_python(kPython3130rc1, "python-3130rc1.mtrace");
  const std::string expected = "memtrace: " + path +
                               "\n"
                               "  process: pid 4242, python3 train.py\n"
                               "  stacks:  at most 32 native frames (16 on threads with Python frames), deeper "
                               "ones cut\n"
                               "  python:  frames read from CPython 3.13.0rc1\n"
                               "  events:  2 in 1 chunk over 0.000 s\n";
  EXPECT_EQ(overview("summary", path), expected);
  EXPECT_EQ(overview("leaks", path), expected);
  EXPECT_EQ(overview("oom", path), expected);
}

TEST(PythonVersion, NoLineWithoutPythonFrames) {
  const std::string path = trace_with_python(0, "python-none.mtrace");
  EXPECT_EQ(overview("summary", path), "memtrace: " + path +
                                           "\n"
                                           "  process: pid 4242, python3 train.py\n"
                                           "  stacks:  at most 32 native frames, deeper ones cut\n"
                                           "  events:  2 in 1 chunk over 0.000 s\n");
}

std::string json_python_version(const std::string& command, const std::string& path) {
  return nlohmann::json::parse(test::memtrace_stdout(command + " " + path + " --json"))["trace"]["python_version"]
      .dump();
}

TEST(PythonVersion, JsonHasTheVersionAsCPythonWritesItOrNull) {
  // 3 << 24 | 12 << 16 | 3 << 8 | 0xF << 4 = 0x030C03F0 = 51119088, the number --json printed before.
  const std::string final_312 = trace_with_python(51119088, "python-3123.mtrace");
  const std::string rc_313 = trace_with_python(kPython3130rc1, "python-3130rc1-json.mtrace");
  const std::string none = trace_with_python(0, "python-none-json.mtrace");
  for (const char* command : {"summary", "leaks", "oom"}) {
    EXPECT_EQ(json_python_version(command, final_312), "\"3.12.3\"") << command;
    EXPECT_EQ(json_python_version(command, rc_313), "\"3.13.0rc1\"") << command;
    EXPECT_EQ(json_python_version(command, none), "null") << command;
  }
}

}  // namespace
}  // namespace memtrace
