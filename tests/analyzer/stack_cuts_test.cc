// Stacks the tracer cut short (Stack.native_frames_cut / python_frames_cut): the line the text reports print
// where the missing frames belong, and the two keys of each stack object in --json.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "analysis_trace.h"
#include "format.h"
#include "frames.h"
#include "report_text.h"
#include "stack_table.h"
#include "symbolizer.h"
#include "trace_reader.h"

namespace memtrace {
namespace {

using test::kMiB;
using test::kPy;

// Python frames 1 (train.py:42 train_step) and 2 (train.py:50 <module>), and three stacks, innermost first:
//   10: 0x1000, 0x2000, train_step, <module>   native cut at 2 frames, Python frames cut (the tracer appends the
//                                               Python frames the shortened unwind did not reach outermost)
//   11: 0x1000, <module>                       complete
//   12: 0x3000                                 native cut at 1 frame, no Python frames
// Outside every module (the trace has no Module records), so a native frame shows as its address.
test::TraceBuilder cut_stacks_trace() {
  test::TraceBuilder b;
  b.start().python_frame(1, "train.py", "train_step", 42).python_frame(2, "train.py", "<module>", 50);
  b.stack(10, {0x1000, 0x2000, kPy | 1, kPy | 2}, /*native_frames_cut=*/true, /*python_frames_cut=*/true);
  b.stack(11, {0x1000, kPy | 2});
  b.stack(12, {0x3000}, /*native_frames_cut=*/true, /*python_frames_cut=*/false);
  return b;
}

// The stack `stack_id` of `b` as print_frames prints it, with `options`.
std::string printed_from(test::TraceBuilder b, uint64_t stack_id, const TextOptions& options) {
  StackTable stacks;
  b.end_chunk();
  std::string path = test::temp_path("stack-cuts-print.mtrace");
  test::write_file(path, b.bytes());
  read_trace(path, [&](const proto::Record& r) { stacks.add(r); });
  Symbolizer symbolizer(stacks.modules());
  FrameResolver resolver(stacks, symbolizer);
  std::ostringstream out;
  print_frames(out, resolver.resolve(stack_id), options);
  return out.str();
}

std::string printed(uint64_t stack_id, bool all_frames = false) {
  TextOptions options;
  options.all_frames = all_frames;
  return printed_from(cut_stacks_trace(), stack_id, options);
}

// The depths a trace's TraceStart records, as the reports pass them on: 32 native frames, 16 under Python.
TextOptions with_limits(bool all_frames = false) {
  TextOptions options;
  options.all_frames = all_frames;
  options.max_native_frames = 32;
  options.max_native_frames_python = 16;
  return options;
}

TEST(StackCuts, TextMarksEachCutAfterTheLastFrameOfItsKind) {
  // 2 native frames, then the 2 Python frames: each line after the last of its kind. The trace names no limits
  // (its TraceStart has none), so the native line names both settings.
  const std::string both =
      "      0x1000\n"
      "      0x2000\n"
      "      ... native frames stop here: the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)\n"
      "      train.py:42 train_step\n"
      "      train.py:50 <module>\n"
      "      ... outer Python frames past the 2nd not recorded\n";
  EXPECT_EQ(printed(10), both);
  EXPECT_EQ(printed(10, /*all_frames=*/true), both);
  EXPECT_EQ(printed(11),
            "      0x1000\n"
            "      train.py:50 <module>\n");
  EXPECT_EQ(printed(12),
            "      0x3000\n"
            "      ... native frames stop here: the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)\n");
  EXPECT_EQ(printed(99), "      (no stack)\n");  // an id the trace never defined: no frames, no cut line
}

TEST(StackCuts, TheLineNamesTheLimitThatAppliedToTheStack) {
  // Stack 10 has Python frames: it was taken on a thread with Python frames, whose limit is the second figure.
  EXPECT_EQ(printed_from(cut_stacks_trace(), 10, with_limits()),
            "      0x1000\n"
            "      0x2000\n"
            "      ... native frames stop here: the tracer's limit on threads with Python frames, 16 "
            "(MEMTRACE_MAX_FRAMES_PYTHON)\n"
            "      train.py:42 train_step\n"
            "      train.py:50 <module>\n"
            "      ... outer Python frames past the 2nd not recorded\n");
  EXPECT_EQ(printed_from(cut_stacks_trace(), 12, with_limits()),
            "      0x3000\n"
            "      ... native frames stop here: the tracer's limit, 32 (MEMTRACE_MAX_FRAMES)\n");
}

// Stack 13: 0x1000, <module>, then 0x7100 inside libpython (an interpreter frame, hidden by default), native cut.
test::TraceBuilder interpreter_cut_trace() {
  test::TraceBuilder b = cut_stacks_trace();
  proto::Record module;
  module.mutable_module()->set_path("/usr/lib/libpython3.12.so.1.0");
  module.mutable_module()->set_load_address(0x7000);
  module.mutable_module()->set_start(0x7000);
  module.mutable_module()->set_end(0x8000);
  b.record(module);
  b.stack(13, {0x1000, kPy | 2, 0x7100}, /*native_frames_cut=*/true);
  return b;
}

TEST(StackCuts, ACutAtAHiddenInterpreterFrameIsSaidInTheHiddenFramesLine) {
  // Hidden, the last native frame would leave the line standing after <module>, away from the cut: it joins the
  // hidden-frames line instead. With every frame shown, it follows the interpreter frame as any other.
  EXPECT_EQ(printed_from(interpreter_cut_trace(), 13, with_limits()),
            "      0x1000\n"
            "      train.py:50 <module>\n"
            "      (1 Python interpreter frames hidden; the native frames stop at the last: the tracer's limit on "
            "threads with Python frames, 16 (MEMTRACE_MAX_FRAMES_PYTHON))\n");
  const std::string all = printed_from(interpreter_cut_trace(), 13, with_limits(/*all_frames=*/true));
  EXPECT_NE(all.find("      train.py:50 <module>\n      libpython3.12.so.1.0+0x100"), std::string::npos) << all;
  EXPECT_NE(all.find("\n      ... native frames stop here: the tracer's limit on threads with Python frames, 16 "
                     "(MEMTRACE_MAX_FRAMES_PYTHON)\n"),
            std::string::npos)
      << all;
}

// The overview's stacks line from a TraceStart with the two depths and, or not, Python frames read.
std::string stacks_line(uint32_t max_native, uint32_t max_native_python, uint32_t python_version) {
  test::TraceBuilder b;
  proto::Record start;
  start.mutable_start()->set_pid(4242);
  start.mutable_start()->set_start_monotonic_ns(1'000'000'000);
  start.mutable_start()->set_max_native_frames(max_native);
  start.mutable_start()->set_max_native_frames_python(max_native_python);
  start.mutable_start()->set_python_frames(python_version);
  b.record(start).end(0, 0).end_chunk();
  std::string path = test::temp_path("stack-cuts-depths.mtrace");
  test::write_file(path, b.bytes());
  std::string text = test::memtrace_stdout("summary " + path);
  size_t at = text.find("  stacks:");
  return at == std::string::npos ? "(none)" : text.substr(at, text.find('\n', at) - at);
}

TEST(StackCuts, TheOverviewSaysTheDepthsThatApplied) {
  constexpr uint32_t kPython312 = 0x030C03F0;
  EXPECT_EQ(stacks_line(32, 16, kPython312),
            "  stacks:  at most 32 native frames (16 on threads with Python frames), deeper ones cut");
  // Python frames not read (MEMTRACE_PYTHON_FRAMES=0, no Python, an unsupported version): one depth for all.
  EXPECT_EQ(stacks_line(8, 4, 0), "  stacks:  at most 8 native frames, deeper ones cut");
  EXPECT_EQ(stacks_line(0, 0, kPython312), "  stacks:  no native frames (none on threads with Python frames)");
  EXPECT_EQ(stacks_line(0, 0, 0), "  stacks:  no native frames");
  EXPECT_EQ(stacks_line(0, 16, kPython312),
            "  stacks:  no native frames (16 on threads with Python frames), deeper ones cut");
}

TEST(StackCuts, Ordinals) {
  EXPECT_EQ(ordinal(1), "1st");
  EXPECT_EQ(ordinal(2), "2nd");
  EXPECT_EQ(ordinal(3), "3rd");
  EXPECT_EQ(ordinal(4), "4th");
  EXPECT_EQ(ordinal(11), "11th");
  EXPECT_EQ(ordinal(12), "12th");
  EXPECT_EQ(ordinal(13), "13th");
  EXPECT_EQ(ordinal(16), "16th");
  EXPECT_EQ(ordinal(21), "21st");
  EXPECT_EQ(ordinal(32), "32nd");
  EXPECT_EQ(ordinal(111), "111th");
  EXPECT_EQ(ordinal(123), "123rd");
  EXPECT_EQ(ordinal(128), "128th");
}


// Three cudaMallocs at 1, 2, 3 ms, one from each stack, none freed: 3 MiB from stack 10, 2 MiB from 11, 1 MiB from
// 12. Peak driver memory and live at exit are all three: every list holds stack 10, then 11, then 12.
std::string cut_stacks_trace_file() {
  constexpr int64_t ms = 1'000'000;
  test::TraceBuilder b = cut_stacks_trace();
  b.event(test::driver_alloc(0, 0x100000, 3 * kMiB, ms, 10))
      .event(test::driver_alloc(0, 0x400000, 2 * kMiB, ms, 11))
      .event(test::driver_alloc(0, 0x600000, kMiB, ms, 12))
      .end(3, ms)
      .end_chunk();
  std::string path = test::temp_path("stack-cuts.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

TEST(StackCuts, JsonSaysOnEveryStackObjectWhetherItWasCut) {
  std::string path = cut_stacks_trace_file();
  const nlohmann::json leaks = nlohmann::json::parse(test::memtrace_stdout("leaks --json " + path))["leaks"];
  ASSERT_EQ(leaks.size(), 3u);
  const bool expected[3][2] = {{true, true}, {false, false}, {true, false}};  // stacks 10, 11, 12
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(leaks[i]["bytes"], (3 - i) * kMiB);
    EXPECT_EQ(leaks[i]["native_frames_cut"], expected[i][0]);
    EXPECT_EQ(leaks[i]["python_frames_cut"], expected[i][1]);
  }
  EXPECT_EQ(leaks[0]["frames"].size(), 4u);
  const nlohmann::json peak =
      nlohmann::json::parse(test::memtrace_stdout("summary --json " + path))["devices"][0]["live_at_peak"];
  ASSERT_EQ(peak.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(peak[i]["native_frames_cut"], expected[i][0]);
    EXPECT_EQ(peak[i]["python_frames_cut"], expected[i][1]);
  }
}

TEST(StackCuts, LeaksTextMarksTheCutStacksOnly) {
  std::string text = test::memtrace_stdout("leaks " + cut_stacks_trace_file());
  const std::string expected =
      "    #1 device 0: 3.00 MiB (3,145,728 B) in 1 allocation\n"
      "      0x1000\n"
      "      0x2000\n"
      "      ... native frames stop here: the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)\n"
      "      train.py:42 train_step\n"
      "      train.py:50 <module>\n"
      "      ... outer Python frames past the 2nd not recorded\n"
      "    #2 device 0: 2.00 MiB (2,097,152 B) in 1 allocation\n"
      "      0x1000\n"
      "      train.py:50 <module>\n"
      "    #3 device 0: 1.00 MiB (1,048,576 B) in 1 allocation\n"
      "      0x3000\n"
      "      ... native frames stop here: the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)\n";
  EXPECT_NE(text.find(expected), std::string::npos) << text;
}

}  // namespace
}  // namespace memtrace
