// Stacks whose Python frames the tracer borrowed from the thread waiting in PyTorch's backward
// (Stack.python_frames_from_backward): the StackTable reads the mark, FrameResolver passes it on, call sites keep a
// borrowed stack apart from an unborrowed one with the same frames, and --json and `memtrace dump` say it only
// where it is true.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <sstream>

#include "read/trace_reader.h"
#include "report/text/report_text.h"
#include "stacks/call_sites.h"
#include "stacks/frames.h"
#include "stacks/stack_table.h"
#include "stacks/symbolizer.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

constexpr uint64_t kPy = kPythonFrameBit;
constexpr uint64_t kMiB = 1024 * 1024;

proto::Record stack_record(uint64_t id, const std::vector<uint64_t>& frames, bool from_backward) {
  proto::Record r;
  r.mutable_stack()->set_id(id);
  for (uint64_t f : frames) r.mutable_stack()->add_frames(f);
  r.mutable_stack()->set_python_frames_from_backward(from_backward);
  return r;
}

// Python frames 1 = torch/autograd/graph.py:829 _engine_run_backward, 2 = train.py:42 step (loss.backward()),
// 3 = train.py:50 <module>. Stacks, innermost first (outside every module: the trace has no Module records):
//   20: 0x1000 (AddmmBackward0::apply, say), 0x2000, then frames 1, 2, 3 borrowed from the waiting thread
//   21: the same frames, not borrowed (as the waiting thread itself would record them)
//   22: 0x3000, no Python frames
// Events: cudaMallocs of 3 MiB (stack 20), 2 MiB (21), 1 MiB (22) at 1, 2 and 3 ms, none freed.
test::TraceBuilder backward_trace() {
  constexpr int64_t ms = 1'000'000;
  test::TraceBuilder b;
  b.start()
      .python_frame(1, "/venv/torch/autograd/graph.py", "_engine_run_backward", 829)
      .python_frame(2, "train.py", "step", 42)
      .python_frame(3, "train.py", "<module>", 50);
  const std::vector<uint64_t> frames = {0x1000, 0x2000, kPy | 1, kPy | 2, kPy | 3};
  b.record(stack_record(20, frames, true)).record(stack_record(21, frames, false));
  b.record(stack_record(22, {0x3000}, false));
  b.event(test::driver_alloc(0, 0x100000, 3 * kMiB, ms, 20))
      .event(test::driver_alloc(0, 0x400000, 2 * kMiB, ms, 21))
      .event(test::driver_alloc(0, 0x600000, kMiB, ms, 22))
      .end(3, ms)
      .end_chunk();
  return b;
}

std::string backward_trace_file() {
  const std::string path = test::temp_path("backward-stacks.mtrace");
  test::write_file(path, backward_trace().bytes());
  return path;
}

StackTable load_stacks() {
  StackTable stacks;
  read_trace(backward_trace_file(), [&](const proto::Record& r) { stacks.add(r); });
  return stacks;
}

TEST(BackwardStacks, StackTableReadsTheMark) {
  const StackTable stacks = load_stacks();
  EXPECT_TRUE(stacks.python_frames_from_backward(20));
  EXPECT_FALSE(stacks.python_frames_from_backward(21));
  EXPECT_FALSE(stacks.python_frames_from_backward(22));
  EXPECT_FALSE(stacks.python_frames_from_backward(99));  // no such stack
  EXPECT_FALSE(stacks.python_frames_from_backward(0));
  EXPECT_EQ(*stacks.frames(20), *stacks.frames(21));
}

TEST(BackwardStacks, ResolvedStackCarriesTheMark) {
  const StackTable stacks = load_stacks();
  Symbolizer symbolizer(stacks.modules());
  FrameResolver resolver(stacks, symbolizer);
  const ResolvedStack borrowed = resolver.resolve(20);
  EXPECT_TRUE(borrowed.python_frames_from_backward);
  ASSERT_EQ(borrowed.frames.size(), 5u);
  EXPECT_EQ(borrowed.frames[2].function, "_engine_run_backward");
  EXPECT_EQ(borrowed.frames[3].file, "train.py");
  EXPECT_EQ(borrowed.frames[3].line, 42u);
  EXPECT_FALSE(resolver.resolve(21).python_frames_from_backward);
  EXPECT_FALSE(resolver.resolve(99).python_frames_from_backward);
}

// Equal frames, one borrowed: two portable keys, two sites.
TEST(BackwardStacks, SiteKeyTellsABorrowedStackFromAnUnborrowedOne) {
  const StackTable stacks = load_stacks();
  const std::optional<PortableSiteKey> borrowed = site_key(stacks, 20), own = site_key(stacks, 21);
  ASSERT_TRUE(borrowed && own);
  EXPECT_TRUE(borrowed->python_frames_from_backward);
  EXPECT_FALSE(own->python_frames_from_backward);
  EXPECT_EQ(borrowed->frames, own->frames);
  EXPECT_EQ(borrowed->cuts, own->cuts);
  EXPECT_NE(*borrowed, *own);
  EXPECT_TRUE(SameTableLess{}(*own, *borrowed));  // false < true, after equal frames and cuts
  EXPECT_FALSE(SameTableLess{}(*borrowed, *own));
  const SiteGrouping grouping(stacks);
  EXPECT_EQ(grouping.site_of(20), 20u);
  EXPECT_EQ(grouping.site_of(21), 21u);
}

// leaks --json: three sites (20 and 21 not merged), the key only on the borrowed one.
TEST(BackwardStacks, JsonHasTheKeyOnlyWhereTrue) {
  const std::string path = backward_trace_file();
  const nlohmann::json leaks = nlohmann::json::parse(test::memtrace_stdout("leaks --json " + path))["leaks"];
  ASSERT_EQ(leaks.size(), 3u);
  EXPECT_EQ(leaks[0]["bytes"], 3 * kMiB);
  EXPECT_EQ(leaks[0]["python_frames_from_backward"], true);
  EXPECT_EQ(leaks[1]["bytes"], 2 * kMiB);
  EXPECT_FALSE(leaks[1].contains("python_frames_from_backward"));
  EXPECT_EQ(leaks[2]["bytes"], kMiB);
  EXPECT_FALSE(leaks[2].contains("python_frames_from_backward"));
  const nlohmann::json peak =
      nlohmann::json::parse(test::memtrace_stdout("summary --json " + path))["devices"][0]["live_at_peak"];
  ASSERT_EQ(peak.size(), 3u);
  EXPECT_EQ(peak[0]["python_frames_from_backward"], true);
  EXPECT_FALSE(peak[1].contains("python_frames_from_backward"));
}

// A borrowed stack cut at the native depth was cut at the depth of threads without Python frames (32 here), not at
// that of threads with (16): the thread had none of its own.
TEST(BackwardStacks, TextNamesTheLimitOfThreadsWithoutPython) {
  StackTable stacks;
  proto::Record frame;
  frame.mutable_python_frame()->set_id(1);
  frame.mutable_python_frame()->set_file("train.py");
  frame.mutable_python_frame()->set_function("step");
  frame.mutable_python_frame()->set_line(42);
  stacks.add(frame);
  stacks.add(stack_record(30, {0x1000, kPy | 1}, true));
  stacks.add(stack_record(31, {0x1000, kPy | 1}, false));
  Symbolizer symbolizer(stacks.modules());
  FrameResolver resolver(stacks, symbolizer);
  TextOptions options;
  options.max_native_frames = 32;
  options.max_native_frames_python = 16;
  auto printed = [&](uint64_t id) {
    ResolvedStack stack = resolver.resolve(id);
    stack.cuts.native_frames_cut = true;
    std::ostringstream out;
    print_frames(out, stack, options);
    return out.str();
  };
  EXPECT_EQ(printed(30),
            "      (on the autograd thread; Python stack of the thread waiting in backward())\n"
            "    > train.py:42 step\n"
            "      native: outside every known module (1 frame, cut at MEMTRACE_MAX_FRAMES=32; --all-frames shows "
            "them)\n");
  EXPECT_EQ(printed(31),
            "    > train.py:42 step\n"
            "      native: outside every known module (1 frame, cut at MEMTRACE_MAX_FRAMES_PYTHON=16; --all-frames "
            "shows them)\n");
}

// memtrace dump: the Stack record's line, and with --frames the line of an event with that stack.
TEST(BackwardStacks, DumpSaysItOnTheStackAndItsEvents) {
  const std::string path = backward_trace_file();
  std::istringstream dump(test::memtrace_stdout("dump " + path));
  std::vector<nlohmann::json> stacks;
  for (std::string line; std::getline(dump, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["record"] == "stack") stacks.push_back(j);
  }
  ASSERT_EQ(stacks.size(), 3u);
  EXPECT_EQ(stacks[0]["id"], 20);
  EXPECT_EQ(stacks[0]["python_frames_from_backward"], true);
  EXPECT_FALSE(stacks[1].contains("python_frames_from_backward"));
  EXPECT_FALSE(stacks[2].contains("python_frames_from_backward"));

  std::istringstream with_frames(test::memtrace_stdout("dump --frames " + path));
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(with_frames, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["record"] == "event") events.push_back(j);
  }
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["stack_id"], 20);
  EXPECT_EQ(events[0]["python_frames"], 3);
  EXPECT_EQ(events[0]["python_frames_from_backward"], true);
  EXPECT_FALSE(events[1].contains("python_frames_from_backward"));
}

}  // namespace
}  // namespace memtrace
