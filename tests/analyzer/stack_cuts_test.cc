// Stacks the tracer cut short (Stack.native_frames_cut / python_frames_cut): the line the text reports print
// where the missing frames belong, and the two keys of each stack object in --json.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "analysis_trace.h"
#include "read/trace_reader.h"
#include "report/text/report_text.h"
#include "stacks/frames.h"
#include "stacks/stack_table.h"
#include "stacks/symbolizer.h"
#include "util/format.h"

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
  // Listed (--all-frames): 2 native frames, then the 2 Python frames, each line after the last of its kind. The
  // trace names no limits (its TraceStart has none), so the native line names both settings.
  EXPECT_EQ(printed(10, /*all_frames=*/true),
            "      0x1000\n"
            "      0x2000\n"
            "      ... native frames stop here: the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)\n"
            "      train.py:42 train_step\n"
            "      train.py:50 <module>\n"
            "      ... outer Python frames past the 2nd not recorded\n");
  // Folded (site_lines.h): the Python cut after the last Python frame, the native cut in the native line.
  EXPECT_EQ(printed(10),
            "    > train.py:42 train_step\n"
            "    > train.py:50 <module>\n"
            "      ... outer Python frames past the 2nd not recorded\n"
            "      native: outside every known module (2 frames, cut at the tracer's limit (MEMTRACE_MAX_FRAMES / "
            "MEMTRACE_MAX_FRAMES_PYTHON); --all-frames shows them)\n");
  EXPECT_EQ(printed(11),
            "    > train.py:50 <module>\n"
            "      native: outside every known module (1 frame; --all-frames shows them)\n");
  EXPECT_EQ(
      printed(12),
      "      0x3000\n"
      "      ... native frames stop here: the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)\n");
  EXPECT_EQ(printed(99), "      (no stack)\n");  // an id the trace never defined: no frames, no cut line
}

TEST(StackCuts, TheLineNamesTheLimitThatAppliedToTheStack) {
  // Stack 10 has Python frames: it was taken on a thread with Python frames, whose limit is the second figure.
  EXPECT_EQ(printed_from(cut_stacks_trace(), 10, with_limits(/*all_frames=*/true)),
            "      0x1000\n"
            "      0x2000\n"
            "      ... native frames stop here: the tracer's limit on threads with Python frames, 16 "
            "(MEMTRACE_MAX_FRAMES_PYTHON)\n"
            "      train.py:42 train_step\n"
            "      train.py:50 <module>\n"
            "      ... outer Python frames past the 2nd not recorded\n");
  EXPECT_EQ(printed_from(cut_stacks_trace(), 10, with_limits()),
            "    > train.py:42 train_step\n"
            "    > train.py:50 <module>\n"
            "      ... outer Python frames past the 2nd not recorded\n"
            "      native: outside every known module (2 frames, cut at MEMTRACE_MAX_FRAMES_PYTHON=16; --all-frames "
            "shows them)\n");
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

TEST(StackCuts, ACutAtAnInterpreterFrameIsSaidInTheNativeLine) {
  // Folded, the interpreter frame is one of the native line's frames, and the line says the cut. With every frame
  // shown, it follows the interpreter frame as any other.
  EXPECT_EQ(printed_from(interpreter_cut_trace(), 13, with_limits()),
            "    > train.py:50 <module>\n"
            "      native: outside every known module (2 frames, 1 not symbolized on this machine, cut at "
            "MEMTRACE_MAX_FRAMES_PYTHON=16; --all-frames shows them)\n");
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
      "    > train.py:42 train_step\n"
      "    > train.py:50 <module>\n"
      "      ... outer Python frames past the 2nd not recorded\n"
      "      native: outside every known module (2 frames, cut at the tracer's limit (MEMTRACE_MAX_FRAMES / "
      "MEMTRACE_MAX_FRAMES_PYTHON); --all-frames shows them)\n"
      "    #2 device 0: 2.00 MiB (2,097,152 B) in 1 allocation\n"
      "    > train.py:50 <module>\n"
      "      native: outside every known module (1 frame; --all-frames shows them)\n"
      "    #3 device 0: 1.00 MiB (1,048,576 B) in 1 allocation\n"
      "      0x3000\n"
      "      ... native frames stop here: the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)\n";
  EXPECT_NE(text.find(expected), std::string::npos) << text;
}

// ---- Records past what the tracer writes (stack_table.h): kept to its limits, counted ----

const std::string kEllipsis = "\u2026";

proto::Record stack_record(uint64_t id, const std::vector<uint64_t>& frames) {
  proto::Record r;
  r.mutable_stack()->set_id(id);
  for (uint64_t f : frames) r.mutable_stack()->add_frames(f);
  return r;
}

TEST(RecordLimits, InterpreterModulesAreNamedAsTheRegexNamedThem) {
  for (const char* name : {"libpython3.12.so.1.0", "libpython3.so", "libpython.so", "libpython3.12d.so",
                           "libpython3.12-pgo.so.1", "python", "python3", "python3.12", "python3.12.3"})
    EXPECT_TRUE(is_python_interpreter_module(name)) << name;
  for (const char* name : {"", "libpython3.12.a", "libpython", "python3.12d", "python3-config", "ipython",
                           "xlibpython3.so", "libtorch_python.so", "pythonw", "libpython3.so\n", "libpython\r.so"})
    EXPECT_FALSE(is_python_interpreter_module(name)) << name;
  // A name of 100 KB took std::regex's recursion past the stack (SIGSEGV); now a scan.
  const std::string long_name(100'000, 'a');
  EXPECT_FALSE(is_python_interpreter_module(long_name));
  EXPECT_TRUE(is_python_interpreter_module("libpython" + long_name + ".so"));
  EXPECT_TRUE(is_python_interpreter_module("python" + std::string(100'000, '3')));
  EXPECT_FALSE(is_python_interpreter_module("python" + std::string(100'000, '3') + "x"));
}

TEST(RecordLimits, ModulesListedInDescendingOrderAreFound) {
  // 100,000 modules of 0x1000 bytes each, highest first (each was a shift of the whole sorted vector); every
  // tenth is the interpreter.
  StackTable stacks;
  constexpr uint64_t kCount = 100'000;
  for (uint64_t i = kCount; i-- > 0;) {
    proto::Record r;
    r.mutable_module()->set_path(i % 10 == 0 ? "/usr/lib/libpython3.12.so.1.0" : "/usr/lib/libfoo.so");
    r.mutable_module()->set_start(0x100000 + i * 0x2000);
    r.mutable_module()->set_end(0x100000 + i * 0x2000 + 0x1000);
    stacks.add(r);
  }
  EXPECT_EQ(stacks.modules().size(), kCount);
  EXPECT_TRUE(stacks.in_python_interpreter(0x100000));                              // module 0
  EXPECT_TRUE(stacks.in_python_interpreter(0x100000 + 50'000 * 0x2000 + 0xfff));    // module 50,000's last byte
  EXPECT_FALSE(stacks.in_python_interpreter(0x100000 + 50'000 * 0x2000 + 0x1000));  // the gap after it
  EXPECT_FALSE(stacks.in_python_interpreter(0x100000 + 50'001 * 0x2000));           // module 50,001: libfoo
  EXPECT_FALSE(stacks.in_python_interpreter(0xfffff));                              // below every module
  // Two modules at one start: the one listed last is found.
  proto::Record later;
  later.mutable_module()->set_path("/usr/lib/libpython3.12.so.1.0");
  later.mutable_module()->set_start(0x100000 + 1 * 0x2000);
  later.mutable_module()->set_end(0x100000 + 1 * 0x2000 + 0x1000);
  stacks.add(later);
  EXPECT_TRUE(stacks.in_python_interpreter(0x100000 + 1 * 0x2000));
}

TEST(RecordLimits, AStackLongerThanTheTracerWritesKeepsItsFirstFrames) {
  StackTable stacks;
  // A million native frames: the first 256 kept, marked cut where the native frames stop.
  std::vector<uint64_t> native(1'000'000);
  for (size_t i = 0; i < native.size(); ++i) native[i] = 0x1000 + i;
  stacks.add(stack_record(1, native));
  ASSERT_NE(stacks.frames(1), nullptr);
  EXPECT_EQ(*stacks.frames(1), std::vector<uint64_t>(native.begin(), native.begin() + 256));
  EXPECT_EQ(stacks.cuts(1), (StackCuts{true, false}));
  EXPECT_EQ(stacks.record_cuts().stacks_cut, 1u);
  // 10 Python frames, 300 native, 5 Python: kept up to the 257th native frame (10 + 256), both kinds lost frames.
  std::vector<uint64_t> mixed;
  for (uint64_t i = 0; i < 10; ++i) mixed.push_back(kPy | i);
  for (uint64_t i = 0; i < 300; ++i) mixed.push_back(0x5000 + i);
  for (uint64_t i = 10; i < 15; ++i) mixed.push_back(kPy | i);
  stacks.add(stack_record(2, mixed));
  EXPECT_EQ(*stacks.frames(2), std::vector<uint64_t>(mixed.begin(), mixed.begin() + 266));
  EXPECT_EQ(stacks.cuts(2), (StackCuts{true, true}));
  // 200 Python frames: the first 128.
  std::vector<uint64_t> python;
  for (uint64_t i = 0; i < 200; ++i) python.push_back(kPy | i);
  stacks.add(stack_record(3, python));
  EXPECT_EQ(*stacks.frames(3), std::vector<uint64_t>(python.begin(), python.begin() + 128));
  EXPECT_EQ(stacks.cuts(3), (StackCuts{false, true}));
  EXPECT_EQ(stacks.record_cuts().stacks_cut, 3u);
  // As deep as the tracer goes, 128 Python frames then 256 native: kept whole, not counted.
  std::vector<uint64_t> deepest(python.begin(), python.begin() + 128);
  deepest.insert(deepest.end(), native.begin(), native.begin() + 256);
  stacks.add(stack_record(4, deepest));
  EXPECT_EQ(*stacks.frames(4), deepest);
  EXPECT_EQ(stacks.cuts(4), (StackCuts{false, false}));
  EXPECT_EQ(stacks.record_cuts().stacks_cut, 3u);
}

TEST(RecordLimits, CutTextKeepsWholeCharactersAndSaysWhatWasCut) {
  std::string text = "abcdef";
  EXPECT_TRUE(cut_text(&text, 3));
  EXPECT_EQ(text, "abc" + kEllipsis + "[truncated 3 bytes]");
  text = "abcd";
  EXPECT_TRUE(cut_text(&text, 3));
  EXPECT_EQ(text, "abc" + kEllipsis + "[truncated 1 byte]");
  text = "a\xc3\xa9z";  // "aéz": cutting at 2 bytes would split the é
  EXPECT_TRUE(cut_text(&text, 2));
  EXPECT_EQ(text, "a" + kEllipsis + "[truncated 3 bytes]");
  text = "a\xf0\x9f\x99\x82";  // "a🙂": 3 continuation bytes backed over
  EXPECT_TRUE(cut_text(&text, 4));
  EXPECT_EQ(text, "a" + kEllipsis + "[truncated 4 bytes]");
  text = "abc";
  EXPECT_FALSE(cut_text(&text, 3));
  EXPECT_EQ(text, "abc");
  // What was cut is given back: a 16 MiB name kept as 4 KiB holds no more than that.
  text = std::string(16 << 20, 'x');
  EXPECT_TRUE(cut_text(&text, 4096));
  EXPECT_EQ(text.size(), 4096 + kEllipsis.size() + std::string("[truncated 16773120 bytes]").size());
  EXPECT_LT(text.capacity(), 8192u);
}

TEST(RecordLimits, AnIdDefinedAgainKeepsItsFirstDefinitionAndIsCounted) {
  StackTable stacks;
  auto stack = [](uint64_t id, uint64_t frame) {
    proto::Record r;
    r.mutable_stack()->set_id(id);
    r.mutable_stack()->add_frames(frame);
    return r;
  };
  auto python_frame = [](uint64_t id, const std::string& file) {
    proto::Record r;
    r.mutable_python_frame()->set_id(id);
    r.mutable_python_frame()->set_file(file);
    return r;
  };
  stacks.add(stack(5, 0x1000));
  stacks.add(stack(5, 0x2000));  // the tracer never reuses an id
  stacks.add(stack(0, 0x3000));  // 0 is "no stack" in every event
  stacks.add(python_frame(9, "first.py"));
  stacks.add(python_frame(9, "second.py"));
  EXPECT_EQ(*stacks.frames(5), std::vector<uint64_t>{0x1000});
  EXPECT_EQ(stacks.frames(0), nullptr);
  EXPECT_EQ(stacks.python_frame(9)->file, "first.py");
  EXPECT_EQ(stacks.record_cuts().ids_redefined, 3u);
}

TEST(RecordLimits, NamesAndPathsLongerThanTheTracerWritesAreCut) {
  StackTable stacks;
  proto::Record frame;
  frame.mutable_python_frame()->set_id(7);
  frame.mutable_python_frame()->set_file(std::string(5000, 'f'));
  frame.mutable_python_frame()->set_function(std::string(4096, 'g'));  // exactly the tracer's limit: kept
  frame.mutable_python_frame()->set_line(3);
  stacks.add(frame);
  ASSERT_NE(stacks.python_frame(7), nullptr);
  EXPECT_EQ(stacks.python_frame(7)->file, std::string(4096, 'f') + kEllipsis + "[truncated 904 bytes]");
  EXPECT_EQ(stacks.python_frame(7)->function, std::string(4096, 'g'));
  proto::Record module;
  module.mutable_module()->set_path("/" + std::string(10'000, 'm'));
  stacks.add(module);
  EXPECT_EQ(stacks.modules().at(0).path(), "/" + std::string(4095, 'm') + kEllipsis + "[truncated 5905 bytes]");
  EXPECT_EQ(stacks.record_cuts().strings_cut, 2u);
  EXPECT_EQ(stacks.record_cuts().stacks_cut, 0u);
}

TEST(RecordLimits, TheStartRecordKeepsWhatTheTracerCouldWrite) {
  StackTable stacks;
  proto::TraceStart start;
  start.set_hostname(std::string(300, 'h'));
  start.set_tracer_version("memtrace 0.1.0");
  for (int i = 0; i < 5000; ++i) start.add_argv("x");
  stacks.bound(&start);
  EXPECT_EQ(start.hostname(), std::string(255, 'h') + kEllipsis + "[truncated 45 bytes]");
  EXPECT_EQ(start.tracer_version(), "memtrace 0.1.0");
  // 4096 one-byte arguments and their 4095 separators fill the 8191 bytes.
  ASSERT_EQ(start.argv_size(), 4097);
  EXPECT_EQ(start.argv(4095), "x");
  EXPECT_EQ(start.argv(4096), kEllipsis + "[904 more arguments truncated]");
  EXPECT_EQ(stacks.record_cuts().strings_cut, 2u);

  // One argument longer than the buffer: cut, and the one after it dropped.
  proto::TraceStart one_long;
  one_long.add_argv(std::string(10'000, 'a'));
  one_long.add_argv("b");
  stacks.bound(&one_long);
  ASSERT_EQ(one_long.argv_size(), 2);
  EXPECT_EQ(one_long.argv(0), std::string(8191, 'a') + kEllipsis + "[truncated 1809 bytes]");
  EXPECT_EQ(one_long.argv(1), kEllipsis + "[1 more argument truncated]");
  EXPECT_EQ(stacks.record_cuts().strings_cut, 4u);

  // Exactly the buffer: 4095 + 1 + 4095 bytes, kept whole; one byte more is cut from the last.
  proto::TraceStart full;
  full.add_argv(std::string(4095, 'a'));
  full.add_argv(std::string(4095, 'b'));
  stacks.bound(&full);
  EXPECT_EQ(full.argv(1), std::string(4095, 'b'));
  full.set_argv(1, std::string(4096, 'b'));
  stacks.bound(&full);
  EXPECT_EQ(full.argv(1), std::string(4095, 'b') + kEllipsis + "[truncated 1 byte]");
  EXPECT_EQ(stacks.record_cuts().strings_cut, 5u);

  proto::Notice notice;
  notice.set_message(std::string(600, 'n'));
  stacks.bound(&notice);
  EXPECT_EQ(notice.message(), std::string(512, 'n') + kEllipsis + "[truncated 88 bytes]");
  EXPECT_EQ(stacks.record_cuts().strings_cut, 6u);
}

// A trace with a stack of a million native frames (1 MiB live on it at the end) and a Python frame whose file name
// is 5000 bytes on a second stack (2 MiB live).
std::string oversized_records_file() {
  test::TraceBuilder b;
  b.start().python_frame(1, std::string(5000, 'f'), "step", 7);
  std::vector<uint64_t> frames(1'000'000);
  for (size_t i = 0; i < frames.size(); ++i) frames[i] = 0x1000 + i;
  b.stack(10, frames).stack(11, {kPy | 1});
  b.event(test::driver_alloc(0, 0x100000, kMiB, 1'000'000, 10));
  b.event(test::driver_alloc(0, 0x200000, 2 * kMiB, 1'000'000, 11));
  b.end(2, 0).end_chunk();
  std::string path = test::temp_path("oversized-records.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

TEST(RecordLimits, ReportsNameRedefinedIdsAndNoticeCodesTheyDoNotKnow) {
  test::TraceBuilder b;
  b.start().stack(10, {0x1000}).stack(10, {0x2000});
  proto::Record notice;
  notice.mutable_notice()->set_code(static_cast<proto::Notice::Code>(99));
  notice.mutable_notice()->set_message("from a newer tracer");
  b.record(notice);
  b.event(test::driver_alloc(0, 0x100000, kMiB, 1'000'000, 10));
  b.end(1, 0).end_chunk();
  const std::string path = test::temp_path("redefined-ids.mtrace");
  test::write_file(path, b.bytes());
  const std::string text = test::memtrace_stdout("summary " + path);
  EXPECT_NE(text.find("  stack or Python frame ids defined again: 1 (the first definition kept)\n"
                      "  notice code 99: from a newer tracer\n"),
            std::string::npos)
      << text;
  const nlohmann::json trace = nlohmann::json::parse(test::memtrace_stdout("summary --json " + path))["trace"];
  EXPECT_EQ(trace["ids_redefined"], 1);
  EXPECT_EQ(trace["notices"][0]["code"], "99");
}

TEST(RecordLimits, ReportsSayWhatWasCutAndStayBounded) {
  const std::string path = oversized_records_file();
  const std::string text = test::memtrace_stdout("summary " + path);
  EXPECT_NE(text.find("  stacks longer than the tracer writes: 1 (cut to 256 native + 128 Python frames)\n"
                      "  strings longer than the tracer writes: 1 (cut, marked " +
                      kEllipsis + "[truncated])\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    > " + std::string(4096, 'f') + kEllipsis + "[truncated 904 bytes]:7 step\n"),
            std::string::npos);
  EXPECT_NE(text.find("      0x10ff\n      ... native frames stop here"), std::string::npos);  // the 256th frame
  const nlohmann::json leaks = nlohmann::json::parse(test::memtrace_stdout("leaks --json " + path))["leaks"];
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[1]["frames"].size(), 256u);  // 1 MiB: the million-frame stack
  EXPECT_EQ(leaks[1]["frames"][255]["function"], "0x10ff");
  EXPECT_EQ(leaks[1]["native_frames_cut"], true);
  EXPECT_EQ(leaks[0]["frames"][0]["file"], std::string(4096, 'f') + kEllipsis + "[truncated 904 bytes]");
  const nlohmann::json trace = nlohmann::json::parse(test::memtrace_stdout("summary --json " + path))["trace"];
  EXPECT_EQ(trace["stacks_cut"], 1);
  EXPECT_EQ(trace["strings_cut"], 1);
  // A trace within the limits has neither line, nor either key.
  const nlohmann::json plain_trace =
      nlohmann::json::parse(test::memtrace_stdout("summary --json " + cut_stacks_trace_file()))["trace"];
  EXPECT_FALSE(plain_trace.contains("stacks_cut"));
  EXPECT_FALSE(plain_trace.contains("strings_cut"));
  const std::string plain = test::memtrace_stdout("summary " + cut_stacks_trace_file());
  EXPECT_EQ(plain.find("longer than the tracer writes"), std::string::npos) << plain;
}

}  // namespace
}  // namespace memtrace
