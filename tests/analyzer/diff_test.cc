// `memtrace diff BEFORE AFTER` (analysis/diff.h, report/text/diff_text.h, report/json/diff_json.h): two traces of
// one program, loaded at other addresses and with other Python frame ids, compared site by site.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <limits>
#include <sstream>

#include "analysis/diff.h"
#include "analysis_trace.h"
#include "report/json/diff_json.h"
#include "report/text/diff_text.h"
#include "util/format.h"

namespace memtrace {
namespace {

using test::kMiB;
using test::kPy;

constexpr int64_t kMs = 1'000'000;
const std::string kTorchBuildId = "\x11\x22\x33\x44";

// The program's five call sites, each `train.py:<11 + site> <function>` under `train.py:30 <module>`, reached
// through libtorch_cuda.so at offset 0x1000 + 0x100 x (site + 1).
enum Site { kA, kB, kC, kD, kE };
const char* const kFunctions[] = {"forward", "backward", "cache", "old_cache", "weights"};

// One run of the program: where libtorch_cuda.so was loaded, and the ids the trace gave its stacks and Python
// frames (site s: stack stack_base + s, PythonFrame python_base + 1 + s; `<module>`: python_base + 9).
struct ProgramRun {
  uint64_t torch_load = 0;
  uint64_t stack_base = 0;
  uint64_t python_base = 0;
  std::string script = "train.py";
  std::string device_name = "NVIDIA H200";
  uint64_t device_total_bytes = 80ull << 30;
  std::string build_id = kTorchBuildId;
};

// ProgramRun 1 (BEFORE): torch at 0x7f00'0000'0000, stacks 10..14, Python frames 1..5 and 9.
ProgramRun run1() { return ProgramRun{0x7f00'0000'0000, 10, 0}; }
// ProgramRun 2 (AFTER): torch at 0x7fa0'1234'0000, stacks 70..74, Python frames 101..105 and 109, defined in reverse.
ProgramRun run2() { return ProgramRun{0x7fa0'1234'0000, 70, 100}; }

test::TraceBuilder program(const ProgramRun& run) {
  test::TraceBuilder b;
  proto::Record start;
  start.mutable_start()->set_pid(4242);
  start.mutable_start()->set_start_monotonic_ns(1'000'000'000);
  start.mutable_start()->add_argv("python");
  start.mutable_start()->add_argv(run.script);
  b.record(start);
  proto::Record module;
  module.mutable_module()->set_path("/venv/lib/torch/lib/libtorch_cuda.so");
  module.mutable_module()->set_load_address(run.torch_load);
  module.mutable_module()->set_start(run.torch_load + 0x1000);
  module.mutable_module()->set_end(run.torch_load + 0x100000);
  module.mutable_module()->set_build_id(run.build_id);
  b.record(module);
  proto::Record device;
  device.mutable_device()->set_ordinal(0);
  device.mutable_device()->set_name(run.device_name);
  device.mutable_device()->set_total_bytes(run.device_total_bytes);
  b.record(device);
  const bool reverse = run.python_base != 0;
  b.python_frame(run.python_base + 9, "train.py", "<module>", 30);
  for (int i = 0; i < 5; ++i) {
    const int s = reverse ? 4 - i : i;
    b.python_frame(run.python_base + 1 + s, "train.py", kFunctions[s], 11 + s);
  }
  for (uint64_t s = kA; s <= kE; ++s)
    b.stack(run.stack_base + s,
            {run.torch_load + 0x1000 + 0x100 * (s + 1), kPy | (run.python_base + 1 + s), kPy | (run.python_base + 9)});
  return b.end_chunk();
}

// A 64 MiB segment at 1 ms; the blocks follow, 1 ms apart, each at the next 4 MiB of it.
struct Events {
  test::TraceBuilder b;
  const ProgramRun& run;
  uint64_t allocated = 0;
  uint64_t next_address = 0x10000000;
  Events(test::TraceBuilder builder, const ProgramRun& r) : b(std::move(builder)), run(r) {
    b.event(test::driver_alloc(0, 0x10000000, 64 * kMiB, kMs, run.stack_base + kE));
  }
  Events& alloc(Site site, uint64_t bytes) {
    allocated += bytes;
    b.event(test::torch_event(proto::ALLOC, 0, next_address, bytes, allocated, 64 * kMiB, kMs, run.stack_base + site));
    next_address += 4 * kMiB;
    return *this;
  }
  std::string write(const std::string& name) {
    b.end_chunk();
    const std::string path = test::temp_path(name);
    test::write_file(path, b.bytes());
    return path;
  }
};

// BEFORE: E 4 MiB, A 3 MiB, B 1 MiB, D 2 MiB at 2..5 ms: peak allocated 10 MiB at 5 ms (event 4), nothing grows.
std::string before_trace(const ProgramRun& run = run1(), const std::string& name = "diff-before.mtrace") {
  return Events(program(run), run)
      .alloc(kE, 4 * kMiB)
      .alloc(kA, 3 * kMiB)
      .alloc(kB, kMiB)
      .alloc(kD, 2 * kMiB)
      .write(name);
}

// AFTER: E 4 MiB, A 1 MiB (shrank by 2), B 1 MiB, C 3 MiB (new), B 1 MiB, B 1 MiB at 2..7 ms, no D (gone): peak
// allocated 11 MiB at 7 ms (event 6). B grows step after step: 3 blocks of 1 MiB live at exit (7 ms), spanning
// 4..7 ms, all of the 3 ms since its first allocation.
std::string after_trace(const ProgramRun& run = run2(), const std::string& name = "diff-after.mtrace") {
  return Events(program(run), run)
      .alloc(kE, 4 * kMiB)
      .alloc(kA, kMiB)
      .alloc(kB, kMiB)
      .alloc(kC, 3 * kMiB)
      .alloc(kB, kMiB)
      .alloc(kB, kMiB)
      .write(name);
}

TEST(Diff, SitesMatchAcrossRunsAndMoveAsWorkedOut) {
  auto before = analyze_trace(before_trace(), true), after = analyze_trace(after_trace(), true);
  const TraceFigures before_figures = gather_trace_figures(*before), after_figures = gather_trace_figures(*after);
  EXPECT_EQ(before_figures.program, "python train.py");
  EXPECT_EQ(before_figures.sites.size(), 4u);
  EXPECT_EQ(after_figures.sites.size(), 4u);
  const DiffResult d = diff(before_figures, after_figures);
  EXPECT_TRUE(d.same_program);
  EXPECT_TRUE(d.same_devices);
  EXPECT_EQ(d.growth, GrowthMeasure::kPerStep);
  ASSERT_EQ(d.devices.size(), 1u);
  const DeviceChange& device = d.devices[0];
  ASSERT_TRUE(device.before && device.after);
  EXPECT_EQ(device.before->peak_allocated_bytes, 10 * kMiB);
  EXPECT_EQ(device.before->peak_allocated_time_ns, 5 * kMs);
  EXPECT_EQ(device.after->peak_allocated_bytes, 11 * kMiB);
  EXPECT_EQ(device.after->peak_allocated_time_ns, 7 * kMs);
  EXPECT_EQ(device.peak_allocated_change_bytes, int64_t(kMiB));
  EXPECT_FALSE(device.growth_per_iteration_change_bytes);
  EXPECT_TRUE(device.categories.empty());

  // C +3 MiB (new); then B, A and D at 2 MiB each: B first by its growth, then A before D by key (offset 0x1100 <
  // 0x1400); E unchanged last.
  ASSERT_EQ(d.sites.size(), 5u);
  EXPECT_EQ(d.changed_sites, 4u);
  EXPECT_EQ(d.matched_sites, 3u);
  const SiteChange &c = d.sites[0], &b = d.sites[1], &a = d.sites[2], &gone = d.sites[3], &e = d.sites[4];
  EXPECT_FALSE(c.before);
  ASSERT_TRUE(c.after);
  EXPECT_EQ(c.after->stack_id, 70u + kC);
  EXPECT_EQ(c.after->peak_bytes, 3 * kMiB);
  EXPECT_EQ(c.peak_change_bytes, int64_t(3 * kMiB));
  EXPECT_EQ(c.growth_change_bytes, 0);
  ASSERT_TRUE(b.before && b.after);
  EXPECT_EQ(b.before->stack_id, 10u + kB);
  EXPECT_EQ(b.after->stack_id, 70u + kB);
  EXPECT_EQ(b.before->peak_bytes, kMiB);
  EXPECT_EQ(b.before->peak_count, 1u);
  EXPECT_EQ(b.after->peak_bytes, 3 * kMiB);
  EXPECT_EQ(b.after->peak_count, 3u);
  EXPECT_EQ(b.peak_change_bytes, int64_t(2 * kMiB));
  EXPECT_EQ(b.before->growth_bytes, 0);
  EXPECT_EQ(b.after->growth_bytes, int64_t(kMiB));
  EXPECT_EQ(b.growth_change_bytes, int64_t(kMiB));
  ASSERT_TRUE(a.before && a.after);
  EXPECT_EQ(a.before->stack_id, 10u + kA);
  EXPECT_EQ(a.peak_change_bytes, -int64_t(2 * kMiB));
  EXPECT_EQ(a.growth_change_bytes, 0);
  ASSERT_TRUE(gone.before);
  EXPECT_FALSE(gone.after);
  EXPECT_EQ(gone.before->stack_id, 10u + kD);
  EXPECT_EQ(gone.peak_change_bytes, -int64_t(2 * kMiB));
  ASSERT_TRUE(e.before && e.after);
  EXPECT_EQ(e.before->peak_bytes, 4 * kMiB);
  EXPECT_EQ(e.peak_change_bytes, 0);
  EXPECT_FALSE(e.changed());
}

TEST(Diff, EqualTracesGiveNoChange) {
  const std::string path = before_trace();
  auto one = analyze_trace(path, true), two = analyze_trace(path, true);
  const DiffResult d = diff(gather_trace_figures(*one), gather_trace_figures(*two));
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].peak_allocated_change_bytes, 0);
  EXPECT_EQ(d.sites.size(), 4u);
  EXPECT_EQ(d.matched_sites, 4u);
  EXPECT_EQ(d.changed_sites, 0u);
  for (const SiteChange& s : d.sites) {
    EXPECT_EQ(s.peak_change_bytes, 0);
    EXPECT_EQ(s.growth_change_bytes, 0);
  }
  const test::MemtraceRun r = test::run_memtrace_binary("diff " + path + " " + path);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "memtrace diff\n"
            "  before: " +
                path +
                " (pid 4242, python train.py)\n"
                "  after:  " +
                path +
                " (pid 4242, python train.py)\n"
                "\n"
                "Device 0\n"
                "  peak allocated 10.00 MiB (10,485,760 B) at 0.005 s -> 10.00 MiB (10,485,760 B) at 0.005 s: "
                "no change\n"
                "\n"
                "No call site moved: 4 call sites, each with the same bytes at peak allocated and the same growth\n");
}

// The lines of `text` in order: each of `lines` is found after the one before it.
void expect_in_order(const std::string& text, const std::vector<std::string>& lines) {
  size_t at = 0;
  for (const std::string& line : lines) {
    const size_t found = text.find(line, at);
    EXPECT_NE(found, std::string::npos) << "missing, or out of order: " << line << "\nin:\n" << text;
    if (found != std::string::npos) at = found + line.size();
  }
}

TEST(Diff, TextNamesWhatMovedMostFirst) {
  const std::string before = before_trace(), after = after_trace();
  const test::MemtraceRun r = test::run_memtrace_binary("diff " + before + " " + after);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(
      r.out.rfind("memtrace diff\n"
                  "  before: " +
                      before +
                      " (pid 4242, python train.py)\n"
                      "  after:  " +
                      after +
                      " (pid 4242, python train.py)\n"
                      "\n"
                      "Device 0\n"
                      "  peak allocated 10.00 MiB (10,485,760 B) at 0.005 s -> 11.00 MiB (11,534,336 B) at 0.007 s: "
                      "+1.00 MiB (+1,048,576 B)\n"
                      "\n"
                      "Call sites that moved: 4 of 5, by change in bytes live at peak allocated, then in growth per "
                      "step\n"
                      "    #1 device 0, NEW: +3.00 MiB (+3,145,728 B) at peak allocated (none -> 3.00 MiB "
                      "(3,145,728 B) in 1 allocation)\n",
                  0),
      0u)
      << r.out;
  // Each site's frames follow its line: the user's function names it.
  expect_in_order(r.out,
                  {"cache",
                   "    #2 device 0: +2.00 MiB (+2,097,152 B) at peak allocated (1.00 MiB (1,048,576 B) in 1 "
                   "allocation -> 3.00 MiB (3,145,728 B) in 3 allocations)\n"
                   "      grows per step: 0 B -> 1.00 MiB (1,048,576 B), +1.00 MiB (+1,048,576 B)\n",
                   "backward",
                   "    #3 device 0: -2.00 MiB (-2,097,152 B) at peak allocated (3.00 MiB (3,145,728 B) in 1 "
                   "allocation -> 1.00 MiB (1,048,576 B) in 1 allocation)\n",
                   "forward",
                   "    #4 device 0, GONE: -2.00 MiB (-2,097,152 B) at peak allocated (2.00 MiB (2,097,152 B) in "
                   "1 allocation -> none)\n",
                   "old_cache"});
  EXPECT_EQ(r.out.find("weights"), std::string::npos);  // E did not move
  EXPECT_EQ(r.out.find("#5"), std::string::npos);
  // --top 1: the site that moved most only.
  const std::string top = test::memtrace_stdout("diff --top 1 " + before + " " + after);
  EXPECT_NE(top.find("Call sites that moved: 4 of 5 (top 1 shown), by change"), std::string::npos) << top;
  EXPECT_EQ(top.find("#2"), std::string::npos) << top;
}

TEST(Diff, JsonHasEverySiteWithBothSides) {
  const std::string before = before_trace(), after = after_trace();
  const nlohmann::json d = nlohmann::json::parse(test::memtrace_stdout("diff --json " + before + " " + after));
  EXPECT_EQ(d["before"]["file"], before);
  EXPECT_EQ(d["after"]["file"], after);
  EXPECT_EQ(d["program"],
            (nlohmann::json{{"before", "python train.py"}, {"after", "python train.py"}, {"same", true}}));
  EXPECT_EQ(d["same_devices"], true);
  EXPECT_EQ(d["iterations"], (nlohmann::json{{"before", 0}, {"after", 0}}));
  EXPECT_EQ(d["growth_measure"], "per_step");
  ASSERT_EQ(d["devices"].size(), 1u);
  const nlohmann::json& device = d["devices"][0];
  EXPECT_EQ(device["status"], "both");
  EXPECT_EQ(device["before"]["peak_allocated_bytes"], 10 * kMiB);
  EXPECT_EQ(device["before"]["name"], "NVIDIA H200");
  EXPECT_EQ(device["after"]["peak_allocated_bytes"], 11 * kMiB);
  EXPECT_EQ(device["after"]["peak_allocated_time_s"], 0.007);
  EXPECT_EQ(device["peak_allocated_change_bytes"], kMiB);
  EXPECT_EQ(device["growth_per_iteration_change_bytes"], nullptr);
  EXPECT_EQ(d["site_count"], 5);
  EXPECT_EQ(d["changed_site_count"], 4);
  EXPECT_EQ(d["matched_site_count"], 3);
  const nlohmann::json& sites = d["sites"];
  ASSERT_EQ(sites.size(), 5u);
  EXPECT_EQ(sites[0]["status"], "new");
  EXPECT_EQ(sites[0]["before"], nullptr);
  EXPECT_EQ(sites[0]["after"], (nlohmann::json{{"peak_bytes", 3 * kMiB}, {"peak_count", 1}, {"growth_bytes", 0}}));
  EXPECT_EQ(sites[0]["peak_change_bytes"], 3 * kMiB);
  EXPECT_EQ(sites[1]["status"], "changed");
  EXPECT_EQ(sites[1]["before"], (nlohmann::json{{"peak_bytes", kMiB}, {"peak_count", 1}, {"growth_bytes", 0}}));
  EXPECT_EQ(sites[1]["after"], (nlohmann::json{{"peak_bytes", 3 * kMiB}, {"peak_count", 3}, {"growth_bytes", kMiB}}));
  EXPECT_EQ(sites[1]["growth_change_bytes"], kMiB);
  // Every frame, from AFTER: libtorch_cuda.so+0x1200, train.py:12 backward, train.py:30 <module>.
  const nlohmann::json& frames = sites[1]["frames"];
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0]["module"], "libtorch_cuda.so");
  EXPECT_EQ(frames[0]["module_offset"], 0x1200);
  EXPECT_EQ(frames[1]["function"], "backward");
  EXPECT_EQ(frames[1]["line"], 12);
  EXPECT_EQ(frames[2]["function"], "<module>");
  EXPECT_EQ(sites[1]["native_frames_cut"], false);
  EXPECT_EQ(sites[2]["peak_change_bytes"], -int64_t(2 * kMiB));
  EXPECT_EQ(sites[3]["status"], "gone");
  EXPECT_EQ(sites[3]["after"], nullptr);
  EXPECT_EQ(sites[3]["frames"][1]["function"], "old_cache");  // from BEFORE, the only trace that has it
  EXPECT_EQ(sites[4]["status"], "unchanged");
  EXPECT_EQ(sites[4]["peak_change_bytes"], 0);
}

// The figures the iterations and breakdown analyses add (TraceFigures' optional inputs), set by hand on the two
// traces' figures: BEFORE 12 iterations, allocated +2 MiB per iteration, B keeping 2 MiB per iteration; AFTER 40
// iterations, +512 KiB per iteration, B keeping 512 KiB; categories parameters 4 -> 4 MiB, activations 6 -> 5
// MiB, and temporaries only in AFTER (2 MiB).
TEST(Diff, GrowthPerIterationAndCategoriesWhereBothTracesHaveThem) {
  auto before = analyze_trace(before_trace(), true), after = analyze_trace(after_trace(), true);
  TraceFigures one = gather_trace_figures(*before), two = gather_trace_figures(*after);
  auto site = [](TraceFigures& f, uint64_t stack_id) -> SiteFigures& {
    return *std::find_if(f.sites.begin(), f.sites.end(), [&](const SiteFigures& s) { return s.stack_id == stack_id; });
  };
  one.iterations = 12, two.iterations = 40;
  one.growth_per_iteration_measured = two.growth_per_iteration_measured = true;
  one.devices[0].growth_per_iteration_bytes = 2 * kMiB;
  two.devices[0].growth_per_iteration_bytes = 512 * 1024;
  site(one, 10 + kB).growth_per_iteration_bytes = 2 * kMiB;
  site(two, 70 + kB).growth_per_iteration_bytes = 512 * 1024;
  one.devices[0].category_bytes = {{"parameters", 4 * kMiB}, {"activations", 6 * kMiB}, {"gradients", kMiB}};
  two.devices[0].category_bytes = {{"parameters", 4 * kMiB}, {"temporaries", 2 * kMiB}, {"activations", 5 * kMiB}};
  const DiffResult d = diff(one, two);
  EXPECT_EQ(d.growth, GrowthMeasure::kPerIteration);  // preferred to the per-step growth both also have
  EXPECT_EQ(d.iterations_before, 12u);
  EXPECT_EQ(d.iterations_after, 40u);
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].growth_per_iteration_change_bytes, -int64_t(1536 * 1024));
  ASSERT_EQ(d.devices[0].categories.size(), 4u);  // BEFORE's order, then the one only AFTER has
  const CategoryChange &parameters = d.devices[0].categories[0], &activations = d.devices[0].categories[1],
                       &gradients = d.devices[0].categories[2], &temporaries = d.devices[0].categories[3];
  EXPECT_EQ(parameters.name, "parameters");
  EXPECT_EQ(parameters.change_bytes, 0);
  EXPECT_EQ(parameters.before_bytes, 4 * kMiB);
  EXPECT_EQ(activations.name, "activations");
  EXPECT_EQ(activations.before_bytes, 6 * kMiB);
  EXPECT_EQ(activations.change_bytes, -int64_t(kMiB));
  EXPECT_EQ(temporaries.name, "temporaries");
  EXPECT_FALSE(temporaries.before_bytes);
  EXPECT_EQ(temporaries.after_bytes, 2 * kMiB);
  EXPECT_FALSE(temporaries.change_bytes);  // from unknown: no change figure
  EXPECT_EQ(gradients.before_bytes, kMiB);
  EXPECT_FALSE(gradients.after_bytes);
  EXPECT_FALSE(gradients.change_bytes);
  // B: +2 MiB at the peak, growth 2 MiB -> 512 KiB per iteration; the others grow by nothing per iteration.
  ASSERT_EQ(d.sites.size(), 5u);
  EXPECT_EQ(d.sites[1].after->stack_id, 70u + kB);
  EXPECT_EQ(d.sites[1].growth_change_bytes, -int64_t(1536 * 1024));
  EXPECT_EQ(d.sites[2].growth_change_bytes, 0);

  Symbolizer before_symbols(before->stacks.modules(), {}), after_symbols(after->stacks.modules(), {});
  FrameResolver before_frames(before->stacks, before_symbols), after_frames(after->stacks, after_symbols);
  std::ostringstream out;
  print_diff(out, {*before, before_frames}, {*after, after_frames}, d, TextOptions{});
  expect_in_order(out.str(),
                  {"  iterations: 12 before, 40 after\n"
                   "\n"
                   "Device 0\n"
                   "  peak allocated 10.00 MiB (10,485,760 B) at 0.005 s -> 11.00 MiB (11,534,336 B) at "
                   "0.007 s: +1.00 MiB (+1,048,576 B)\n"
                   "  growth per iteration 2.00 MiB (2,097,152 B) -> 512.00 KiB (524,288 B): -1.50 MiB "
                   "(-1,572,864 B)\n"
                   "  at peak allocated, by category:\n"
                   "    parameters: 4.00 MiB (4,194,304 B) -> 4.00 MiB (4,194,304 B), no change\n"
                   "    activations: 6.00 MiB (6,291,456 B) -> 5.00 MiB (5,242,880 B), -1.00 MiB "
                   "(-1,048,576 B)\n"
                   "    gradients: 1.00 MiB (1,048,576 B) -> not known after\n"
                   "    temporaries: not known before -> 2.00 MiB (2,097,152 B)\n"
                   "\n"
                   "Call sites that moved: 4 of 5, by change in bytes live at peak allocated, then in growth "
                   "per iteration\n",
                   "    #2 device 0: +2.00 MiB",
                   "      grows per iteration: 2.00 MiB (2,097,152 B) -> 512.00 KiB (524,288 B), -1.50 MiB "
                   "(-1,572,864 B)\n"});
  // --json: a side not known is null, and so is the change from it.
  const nlohmann::json j = diff_json(*before, before_frames, before_symbols, *after, after_frames, after_symbols, d);
  EXPECT_EQ(j["devices"][0]["categories"][0],
            (nlohmann::json{
                {"name", "parameters"}, {"before_bytes", 4 * kMiB}, {"after_bytes", 4 * kMiB}, {"change_bytes", 0}}));
  EXPECT_EQ(j["devices"][0]["categories"][2],
            (nlohmann::json{
                {"name", "gradients"}, {"before_bytes", kMiB}, {"after_bytes", nullptr}, {"change_bytes", nullptr}}));
  EXPECT_EQ(j["devices"][0]["categories"][3], (nlohmann::json{{"name", "temporaries"},
                                                              {"before_bytes", nullptr},
                                                              {"after_bytes", 2 * kMiB},
                                                              {"change_bytes", nullptr}}));
  EXPECT_EQ(j["notes"], nlohmann::json::array());
}

// A damaged trace's figures stop at the type's limit instead of overflowing: two growing entries of one site
// whose growth per iteration sums past INT64_MAX (the fuzzer's finding; signed overflow is undefined).
TEST(Diff, SiteGrowthPerIterationSaturates) {
  auto before = analyze_trace(before_trace(), true);
  IterationReport iterations;
  iterations.phases.iterations.resize(2);
  iterations.figures.device = 0;
  LeakGroup group;
  group.sites = {GrowingSite{10 + kB, 0, UINT64_MAX}, GrowingSite{10 + kB, 0, 5 * kMiB}};
  iterations.groups = {group};
  const TraceFigures figures = gather_trace_figures(*before, iterations);
  auto b = std::find_if(figures.sites.begin(), figures.sites.end(),
                        [](const SiteFigures& s) { return s.stack_id == 10 + kB; });
  ASSERT_NE(b, figures.sites.end());
  EXPECT_EQ(b->growth_per_iteration_bytes, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(b->peak_bytes, kMiB);  // its one block live at the peak, unchanged
}

// AFTER cut off in its last chunk: E and A (chunk 2, events at 2 and 3 ms) read, B and D (chunk 3) lost. Its peak
// is 7 MiB at 3 ms, 3 MiB under BEFORE's: the note says AFTER is cut short, so that the drop is not read as a fix.
TEST(Diff, TruncatedTraceIsSaidInTextAndJson) {
  const std::string before = before_trace();
  const ProgramRun run = run2();  // Events keeps a reference to it
  Events events(program(run), run);
  events.alloc(kE, 4 * kMiB).alloc(kA, 3 * kMiB);
  events.b.end_chunk();
  const size_t complete_bytes = events.b.bytes().size();
  events.alloc(kB, kMiB).alloc(kD, 2 * kMiB);
  events.b.end_chunk();
  const std::string cut = events.b.bytes().substr(0, events.b.bytes().size() - 5);
  const std::string after = test::temp_path("diff-truncated.mtrace");
  test::write_file(after, cut);
  const std::string note = "  note: AFTER is TRUNCATED (the writer was cut off; read up to byte " +
                           with_thousands(complete_bytes) + " of " + with_thousands(cut.size()) +
                           ", last complete event at 0.003 s): what it lacks from then on is missing, not gone\n";
  const test::MemtraceRun r = test::run_memtrace_binary("diff " + before + " " + after);
  EXPECT_EQ(r.exit_code, 0);
  expect_in_order(r.out, {"  after:  " + after + " (pid 4242, python train.py)\n" + note + "\nDevice 0\n" +
                          "  peak allocated 10.00 MiB (10,485,760 B) at 0.005 s -> 7.00 MiB (7,340,032 B) at "
                          "0.003 s: -3.00 MiB (-3,145,728 B)\n"});
  // Both cut: one note each, BEFORE's first.
  const std::string both = test::memtrace_stdout("diff " + after + " " + after);
  expect_in_order(both, {"  note: BEFORE is TRUNCATED (the writer was cut off; read up to byte ",
                         "  note: AFTER is TRUNCATED (the writer was cut off; read up to byte "});
  const nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("diff --json " + before + " " + after));
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_EQ(j["notes"][0]["kind"], "truncated_after");
  EXPECT_EQ(j["notes"][0]["text"], note.substr(std::string("  note: ").size(), note.size() - 9));
  EXPECT_EQ(j["after"]["truncated"], true);
}

TEST(Diff, OtherProgramOrDeviceIsStillComparedAndSaid) {
  ProgramRun other = run2();
  other.script = "/elsewhere/eval.py";
  other.device_name = "NVIDIA A100";
  other.device_total_bytes = 40ull << 30;
  const std::string before = before_trace(), after = after_trace(other, "diff-other.mtrace");
  const test::MemtraceRun r = test::run_memtrace_binary("diff " + before + " " + after);
  EXPECT_EQ(r.exit_code, 0);
  expect_in_order(r.out, {"  note: different programs (python train.py before, python eval.py after): compared all "
                          "the same\n"
                          "  note: device 0 is another GPU (NVIDIA H200 of 80.00 GiB (85,899,345,920 B) before, "
                          "NVIDIA A100 of 40.00 GiB (42,949,672,960 B) after): compared all the same\n",
                          "Call sites that moved: 4 of 5"});
  // Another build of libtorch_cuda.so: every native frame differs, so no site matches, and the report says so.
  ProgramRun rebuilt = run2();
  rebuilt.build_id = "\x99";
  const std::string third = after_trace(rebuilt, "diff-rebuilt.mtrace");
  const std::string text = test::memtrace_stdout("diff " + before + " " + third);
  EXPECT_NE(text.find("  note: no call site is in both traces (sites match by module build id and offset, and by "
                      "Python file, function and line): are they of one program?\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Call sites that moved: 8 of 8"), std::string::npos) << text;
  // Another program that also shares no call site: one note says both.
  ProgramRun elsewhere = rebuilt;
  elsewhere.script = "eval.py";
  const std::string fourth = after_trace(elsewhere, "diff-elsewhere.mtrace");
  const std::string unrelated = test::memtrace_stdout("diff " + before + " " + fourth);
  EXPECT_NE(unrelated.find("  note: different programs (python train.py before, python eval.py after), no call site "
                           "in both: compared all the same\n\nDevice 0\n"),
            std::string::npos)
      << unrelated;
  EXPECT_EQ(unrelated.find("are they of one program?"), std::string::npos) << unrelated;
  const nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("diff --json " + before + " " + fourth));
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_EQ(j["notes"][0]["kind"], "other_program");
}

TEST(Diff, BadFileIsOneLineNamingItAndExit2) {
  const std::string good = before_trace(), missing = test::temp_path("diff-missing.mtrace");
  const std::string not_trace = test::temp_path("diff-not-a-trace.mtrace");
  test::write_file(not_trace, "hello");
  test::MemtraceRun r = test::run_memtrace_binary("diff " + missing + " " + good);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "memtrace: " + missing + ": cannot open: No such file or directory\n");
  r = test::run_memtrace_binary("diff --json " + good + " " + not_trace);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("memtrace: " + not_trace + ": ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // Not two traces: a usage error.
  r = test::run_memtrace_binary("diff " + good);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("memtrace: diff needs two traces: BEFORE and AFTER\nusage: ", 0), 0u) << r.err;
  r = test::run_memtrace_binary("diff " + good + " " + good + " " + good);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("memtrace: unexpected argument '" + good + "'\n", 0), 0u) << r.err;
}

}  // namespace
}  // namespace memtrace
