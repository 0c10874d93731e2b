// The HTML report's data (report/html/report_data.h) on traces built here, every figure worked out by hand: the
// timeline's binned levels (min/max per bin, a peak inside a bin), the exact level, the top sites' live bytes at
// the coarse bins' ends and at the peak, call sites of alike labels (merged, told apart, numbered), the flame graph
// at the peak, iterations and phases as spans, an OOM entry; the data
// embedded in the page cannot be ended by a frame name; and `memtrace report` itself.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>

#include "analysis/analysis.h"
#include "report/html/report_data.h"
#include "report/html/report_html.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using nlohmann::json;

constexpr uint64_t kPy = 1ull << 63;

struct Report {
  std::unique_ptr<Analysis> analysis;
  std::unique_ptr<Symbolizer> symbolizer;
  std::unique_ptr<FrameResolver> resolver;
  json data;
};

Report report_of(const std::string& path, const ReportDataOptions& options) {
  Report r;
  r.analysis = analyze_trace(path, true);
  r.symbolizer = std::make_unique<Symbolizer>(r.analysis->stacks.modules());
  r.resolver = std::make_unique<FrameResolver>(r.analysis->stacks, *r.symbolizer);
  r.data = report_data(*r.analysis, *r.resolver, r.symbolizer.get(), options);
  return r;
}

// Device 0 without PyTorch (allocated = reserved = driver), Python stacks <module> > a|b|c:
//   t=10 A 100 B (train.py:11 a)     total 100
//   t=20 B  50 B (train.py:12 b)           150
//   t=30 free A                             50
//   t=70 C 200 B (train.py:13 c)           250   <- the peak (event 3)
//   t=75 free B                            200
//   end at t=99
std::string three_sites(const std::string& name) {
  test::TraceBuilder b;
  b.start();
  b.python_frame(1, "train.py", "<module>", 30).python_frame(2, "train.py", "a", 11);
  b.python_frame(3, "train.py", "b", 12).python_frame(4, "train.py", "c", 13);
  b.stack(1, {kPy | 2, kPy | 1}).stack(2, {kPy | 3, kPy | 1}).stack(3, {kPy | 4, kPy | 1});
  b.event(test::driver_alloc(0, 0x1000, 100, 10, 1));
  b.event(test::driver_alloc(0, 0x2000, 50, 10, 2));
  b.event(test::driver_free(0, 0x1000, 10));
  b.event(test::driver_alloc(0, 0x3000, 200, 40, 3));
  b.event(test::driver_free(0, 0x2000, 5));
  b.end(5, 24).end_chunk();
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  return path;
}

std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }

TEST(ReportData, BinnedLevelsHoldEachBinsLowestAndHighestAndThePeak) {
  ReportDataOptions options;
  options.level_bins = {2, 4};  // 5 changes: more than the finest level's 4 bins, so it is binned too
  Report r = report_of(three_sites("report-levels.mtrace"), options);
  const json& device = r.data["devices"].at(0);
  EXPECT_EQ(device["device"], 0);
  EXPECT_EQ(r.data["trace"]["duration_ns"], 99);
  const json& levels = device["timeline"]["levels"];
  ASSERT_EQ(levels.size(), 2u);
  // 2 bins of 99 / 2 + 1 = 50 ns: [0, 50) goes 0 (before the first change) -> 100 -> 150 -> 50; [50, 100) starts
  // at 50 and goes 250 -> 200.
  EXPECT_EQ(levels[0]["bin_ns"], 50);
  EXPECT_EQ(ints(levels[0]["t_ns"]), (std::vector<int64_t>{0, 50}));
  EXPECT_EQ(ints(levels[0]["allocated_min"]), (std::vector<int64_t>{0, 50}));
  EXPECT_EQ(ints(levels[0]["allocated_max"]), (std::vector<int64_t>{150, 250}));
  // 4 bins of 25 ns: [0,25) 0..150, [25,50) 150 -> 50, [50,75) 50 -> 250 (the peak at t=70), [75,100) 250 -> 200.
  EXPECT_EQ(levels[1]["bin_ns"], 25);
  EXPECT_EQ(ints(levels[1]["t_ns"]), (std::vector<int64_t>{0, 25, 50, 75}));
  EXPECT_EQ(ints(levels[1]["allocated_min"]), (std::vector<int64_t>{0, 50, 50, 200}));
  EXPECT_EQ(ints(levels[1]["allocated_max"]), (std::vector<int64_t>{150, 150, 250, 250}));
  EXPECT_EQ(ints(levels[1]["reserved_max"]), (std::vector<int64_t>{150, 150, 250, 250}));  // driver level only
  EXPECT_EQ(ints(levels[1]["driver_min"]), (std::vector<int64_t>{0, 50, 50, 200}));
  EXPECT_EQ(device["timeline"]["peaks"]["allocated"], (json{{"bytes", 250}, {"time_ns", 70}, {"event", 3}}));
}

TEST(ReportData, FewChangesGiveAnExactFinestLevelAndBinsFromTheFirstChange) {
  ReportDataOptions options;
  options.level_bins = {10, 100};
  Report r = report_of(three_sites("report-exact.mtrace"), options);
  const json& levels = r.data["devices"].at(0)["timeline"]["levels"];
  ASSERT_EQ(levels.size(), 2u);
  // 10 bins of 10 ns: nothing known in [0, 10); the first change is in bin 1; bins 4-6 and 8-9 have no change
  // and hold the value carried in.
  EXPECT_EQ(levels[0]["bin_ns"], 10);
  EXPECT_EQ(ints(levels[0]["t_ns"]), (std::vector<int64_t>{10, 20, 30, 40, 50, 60, 70, 80, 90}));
  EXPECT_EQ(ints(levels[0]["allocated_min"]), (std::vector<int64_t>{0, 100, 50, 50, 50, 50, 50, 200, 200}));
  EXPECT_EQ(ints(levels[0]["allocated_max"]), (std::vector<int64_t>{100, 150, 150, 50, 50, 50, 250, 200, 200}));
  // 5 changes, at most 100: one point per change.
  EXPECT_EQ(levels[1]["bin_ns"], 0);
  EXPECT_EQ(ints(levels[1]["t_ns"]), (std::vector<int64_t>{10, 20, 30, 70, 75}));
  EXPECT_EQ(ints(levels[1]["allocated_min"]), (std::vector<int64_t>{100, 150, 50, 250, 200}));
  EXPECT_EQ(levels[1]["allocated_max"], levels[1]["allocated_min"]);
}

TEST(ReportData, TopSitesLiveBytesAtTheEndOfEachCoarseBin) {
  ReportDataOptions options;
  options.level_bins = {10, 100};
  options.max_sites = 2;  // c (200 at most) and a (100); b (50) goes to "other"
  Report r = report_of(three_sites("report-sites.mtrace"), options);
  const json& device = r.data["devices"].at(0);
  ASSERT_EQ(device["sites"].size(), 2u);
  EXPECT_EQ(device["sites"][0]["label"], "train.py:13 c");
  EXPECT_EQ(device["sites"][0]["stack"], (json{"train.py:30 <module>", "train.py:13 c"}));
  EXPECT_EQ(device["sites"][0]["max_bytes"], 200);
  EXPECT_EQ(device["sites"][1]["label"], "train.py:11 a");
  // At the end of bins 1..9 (t < 20, 30, ..., 100): A lives [10, 30), B [20, 75), C from 70.
  EXPECT_EQ(ints(device["site_bytes"][0]), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 200, 200, 200}));
  EXPECT_EQ(ints(device["site_bytes"][1]), (std::vector<int64_t>{100, 100, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(ints(device["other_site_bytes"]), (std::vector<int64_t>{0, 50, 50, 50, 50, 50, 0, 0, 0}));
}

TEST(ReportData, TopSitesLiveBytesAtThePeakAreExactWhereTheBinsEndIsNot) {
  ReportDataOptions options;
  options.level_bins = {2, 4};
  options.max_sites = 2;  // c (200 at most) and a (100); b (50) goes to "other"
  Report r = report_of(three_sites("report-sites-peak.mtrace"), options);
  const json& device = r.data["devices"].at(0);
  ASSERT_EQ(device["sites"].size(), 2u);
  // Bins of 50 ns. The peak (250 at t=70) is inside the bin [50, 100), whose end holds only C (B freed at t=75):
  // c 200, a 0, other 0, 200 in all.
  EXPECT_EQ(ints(device["site_bytes"][0]), (std::vector<int64_t>{0, 200}));
  EXPECT_EQ(ints(device["site_bytes"][1]), (std::vector<int64_t>{0, 0}));  // A lives [10, 30)
  EXPECT_EQ(ints(device["other_site_bytes"]), (std::vector<int64_t>{50, 0}));
  // At the peak itself: C 200 (site c), A freed at t=30 (site a 0), B 50 (other): 250, the peak allocated.
  EXPECT_EQ(ints(device["site_bytes_at_peak"]), (std::vector<int64_t>{200, 0}));
  EXPECT_EQ(device["other_site_bytes_at_peak"], 50);
  EXPECT_EQ(device["timeline"]["peaks"]["allocated"]["bytes"], 250);
}

// Stacks whose labels would be alike, on device 0 without PyTorch, every allocation live to the end:
//   Python (innermost last): <module> > train.py:11 step > module.py:965 _apply > module.py:1370 convert (S1,
//   100 B), and the same with module.py:934 _apply before the 965 one (S2, 50 B): both read "train.py:11 step >
//   torch/nn/modules/module.py:1370 convert".
//   Native, in libx.so (not on this machine: "libx.so+0xOFFSET"), root first: N1 0x30 > 0x20 > 0x10 (1000 B),
//   N2 0x30 > 0x40 > 0x10 (2000 B), N3 0x50 > 0x20 > 0x10 (3000 B): all read "libx.so+0x10".
std::string alike_labels(const std::string& name) {
  const std::string torch = "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py";
  test::TraceBuilder b;
  b.start();
  proto::Record module;
  module.mutable_module()->set_path("/nonexistent/libx.so");
  module.mutable_module()->set_load_address(0x1000000);
  module.mutable_module()->set_start(0x1000000);
  module.mutable_module()->set_end(0x2000000);
  b.record(module);
  b.python_frame(1, "train.py", "<module>", 30).python_frame(2, "train.py", "step", 11);
  b.python_frame(3, torch, "Module._apply", 934).python_frame(4, torch, "Module._apply", 965);
  b.python_frame(5, torch, "convert", 1370);
  b.stack(1, {kPy | 5, kPy | 4, kPy | 2, kPy | 1}).stack(2, {kPy | 5, kPy | 4, kPy | 3, kPy | 2, kPy | 1});
  b.stack(3, {0x1000010, 0x1000020, 0x1000030}).stack(4, {0x1000010, 0x1000040, 0x1000030});
  b.stack(5, {0x1000010, 0x1000020, 0x1000050});
  b.event(test::driver_alloc(0, 0x10000, 100, 10, 1));
  b.event(test::driver_alloc(0, 0x20000, 50, 10, 2));
  b.event(test::driver_alloc(0, 0x30000, 1000, 10, 3));
  b.event(test::driver_alloc(0, 0x40000, 2000, 10, 4));
  b.event(test::driver_alloc(0, 0x50000, 3000, 10, 5));
  b.end(5, 10).end_chunk();
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  return path;
}

TEST(ReportData, SitesOfOneLabelAreMergedWherePythonNamesThemElseToldApartByTheirPath) {
  Report r = report_of(alike_labels("report-alike.mtrace"), ReportDataOptions{});
  const json& device = r.data["devices"].at(0);
  std::vector<std::string> labels;
  for (const json& site : device["sites"]) labels.push_back(site["label"]);
  // Highest first: N3, N2, N1, then S1 + S2 as one site. Read from the allocation outwards, N1 shares 0x10 > 0x20
  // with N3 and parts from it at 0x30; N3 parts from N1 at 0x50; N2 shares only 0x10 and parts at 0x40.
  EXPECT_EQ(labels, (std::vector<std::string>{"libx.so+0x10 (via libx.so+0x50)", "libx.so+0x10 (via libx.so+0x40)",
                                              "libx.so+0x10 (via libx.so+0x30)",
                                              "train.py:11 step > torch/nn/modules/module.py:1370 convert"}));
  EXPECT_EQ(device["sites"][3]["max_bytes"], 150);
  EXPECT_EQ(device["sites"][3]["stack"],
            (json{"train.py:30 <module>", "train.py:11 step", "torch/nn/modules/module.py:965 Module._apply",
                  "torch/nn/modules/module.py:1370 convert"}));  // S1's, seen first
  EXPECT_EQ(ints(device["site_bytes_at_peak"]), (std::vector<int64_t>{3000, 2000, 1000, 150}));
  EXPECT_EQ(device["other_site_bytes_at_peak"], 0);
  // The leak table names the sites as the live table does, one row per site: S1 and S2 (two candidates of the
  // leaks report, 100 B and 50 B) in one row of 150 B and 2 allocations, where S1 ranked.
  std::vector<std::tuple<std::string, int64_t, int64_t>> leaks;  // label, live bytes, allocations
  for (const json& l : r.data["leaks"]) leaks.emplace_back(l["label"], l["live_bytes"], l["allocations"]);
  EXPECT_EQ(leaks, (std::vector<std::tuple<std::string, int64_t, int64_t>>{
                       {"libx.so+0x10 (via libx.so+0x50)", 3000, 1},
                       {"libx.so+0x10 (via libx.so+0x40)", 2000, 1},
                       {"libx.so+0x10 (via libx.so+0x30)", 1000, 1},
                       {"train.py:11 step > torch/nn/modules/module.py:1370 convert", 150, 2}}));
}

// Native stacks that one frame each cannot tell apart, in libx.so, root first: R 0x50 > 0x40 > 0x20 > 0x10 (400 B),
// S 0x40 > 0x30 > 0x10 (300 B), T 0x60 > 0x20 > 0x10 (200 B), U 0x70 > 0x30 > 0x10 (100 B), V 0x10 (50 B).
TEST(ReportData, SitesThatTheirPathCannotTellApartAreNumbered) {
  test::TraceBuilder b;
  b.start();
  proto::Record module;
  module.mutable_module()->set_path("/nonexistent/libx.so");
  module.mutable_module()->set_load_address(0x1000000);
  module.mutable_module()->set_start(0x1000000);
  module.mutable_module()->set_end(0x2000000);
  b.record(module);
  b.stack(1, {0x1000010, 0x1000020, 0x1000040, 0x1000050}).stack(2, {0x1000010, 0x1000030, 0x1000040});
  b.stack(3, {0x1000010, 0x1000020, 0x1000060}).stack(4, {0x1000010, 0x1000030, 0x1000070});
  b.stack(5, {0x1000010});
  const uint64_t sizes[] = {400, 300, 200, 100, 50};
  for (uint64_t k = 0; k < 5; ++k) b.event(test::driver_alloc(0, 0x10000 * (k + 1), sizes[k], 10, k + 1));
  b.end(5, 10).end_chunk();
  const std::string path = test::temp_path("report-numbered.mtrace");
  test::write_file(path, b.bytes());
  Report r = report_of(path, ReportDataOptions{});
  std::vector<std::string> labels;
  for (const json& site : r.data["devices"].at(0)["sites"]) labels.push_back(site["label"]);
  // From the allocation outwards R shares 0x10 > 0x20 with T and parts at 0x40; S shares 0x10 > 0x30 with U and
  // parts at 0x40 too: both are numbered, in the order seen. T parts at 0x60, U at 0x70; V, all of it shared, has
  // no frame to name and its label alone is already unlike the others.
  EXPECT_EQ(labels, (std::vector<std::string>{"libx.so+0x10 (via libx.so+0x40) #1",
                                              "libx.so+0x10 (via libx.so+0x40) #2", "libx.so+0x10 (via libx.so+0x60)",
                                              "libx.so+0x10 (via libx.so+0x70)", "libx.so+0x10"}));
}

TEST(ReportData, FlameGraphAtThePeakIsTheFoldedStacksRootFirst) {
  Report r = report_of(three_sites("report-flame.mtrace"), ReportDataOptions{});
  // At the peak (t=70): B (50, stack 2) and C (200, stack 3), both under <module>.
  json expected = {{"name", "live at peak allocated"},
                   {"value", 250},
                   {"children",
                    {{{"name", "train.py:30 <module>"},
                      {"value", 250},
                      {"children",
                       {{{"name", "train.py:13 c"}, {"value", 200}, {"children", json::array()}},
                        {{"name", "train.py:12 b"}, {"value", 50}, {"children", json::array()}}}}}}}};
  EXPECT_EQ(r.data["devices"].at(0)["flame_at_peak"], expected);
  EXPECT_EQ(r.data["devices"].at(0)["breakdown_at_peak"],
            (json{{{"category", "unclassified"}, {"bytes", 250}, {"in_allocated", true}}}));
}

TEST(ReportData, SmallFlameNodesAreMergedPerParent) {
  ReportDataOptions options;
  options.flame_min_fraction = 0.5;  // 125 B of 250: b (50) is small, but alone under its parent: kept
  Report r = report_of(three_sites("report-flame-small.mtrace"), options);
  const json& module = r.data["devices"].at(0)["flame_at_peak"]["children"].at(0);
  ASSERT_EQ(module["children"].size(), 2u);
  EXPECT_EQ(module["children"][1]["name"], "train.py:12 b");
  options.flame_min_fraction = 0.9;  // 225 B: c (200) and b (50) are both small: one node for the two
  r = report_of(three_sites("report-flame-merged.mtrace"), options);
  const json& merged = r.data["devices"].at(0)["flame_at_peak"]["children"].at(0);
  EXPECT_EQ(merged["value"], 250);
  EXPECT_EQ(merged["children"], (json{{{"name", "[2 smaller stacks]"}, {"value", 250}, {"children", json::array()}}}));
}

// A PyTorch training loop of 3 iterations (iterations_test.cc's, where every event is 1 ms after the one
// before: event i at (i + 1) ms): iteration 1 is events 1-9 (forward 1-2, backward 3-6, optimizer 7-9), 2 is
// 10-16 (forward 10-11, backward 12-14, optimizer 15-16), 3 is 17-23 (forward 17-18, backward 19-21, optimizer
// 22-23), and the last one ends at event 24 (Python finalizing).
std::string training_loop(const std::string& name) {
  constexpr uint64_t kMiB = 1 << 20;
  const std::string torch = "/venv/lib/python3.12/site-packages/torch/";
  test::TraceBuilder b;
  b.start();
  b.python_frame(1, "train.py", "<module>", 30).python_frame(2, "train.py", "train", 5);
  b.python_frame(3, "train.py", "train", 11).python_frame(4, "train.py", "train", 12);
  b.python_frame(5, torch + "nn/modules/module.py", "Module._call_impl", 1790).python_frame(6, "train.py", "train", 13);
  b.python_frame(7, torch + "autograd/__init__.py", "backward", 374).python_frame(8, "train.py", "train", 14);
  b.python_frame(9, torch + "optim/adam.py", "Adam.step", 238);
  b.stack(20, {kPy | 2, kPy | 1}).stack(21, {kPy | 3, kPy | 1}).stack(22, {kPy | 5, kPy | 4, kPy | 1});
  b.stack(23, {kPy | 7, kPy | 6, kPy | 1}).stack(24, {kPy | 9, kPy | 8, kPy | 1});
  std::map<uint64_t, uint64_t> live;
  uint64_t allocated = 0;
  auto alloc = [&](uint64_t address, uint64_t size, uint64_t stack, uint32_t tid = 1) {
    live[address] = size;
    allocated += size;
    proto::Event e = test::torch_event(proto::ALLOC, 0, address, size, allocated, 32 * kMiB, 1'000'000, stack);
    e.set_tid(tid);
    b.event(e);
  };
  auto free = [&](uint64_t address, uint32_t tid = 1) {
    allocated -= live.at(address);
    proto::Event e = test::torch_event(proto::FREE, 0, address, live.at(address), allocated, 32 * kMiB, 1'000'000);
    live.erase(address);
    e.set_tid(tid);
    b.event(e);
  };
  alloc(0x1000000, 8 * kMiB, 20);
  uint64_t x[3] = {0x2000000, 0x2100000, 0x2200000};
  for (int k = 0; k < 3; ++k) {
    alloc(x[k], kMiB, 21);
    alloc(0x3000000, 2 * kMiB, 22);
    alloc(0x4000000, 512, 23);
    if (k == 0) alloc(0x5000000, 2 * kMiB, 0, 2);
    free(0x3000000, 2);
    free(0x4000000);
    if (k == 0) alloc(0x6000000, 4 * kMiB, 24);
    alloc(0x7000000, kMiB, 24);
    free(0x7000000);
  }
  b.event(test::finalizing(1'000'000));
  free(x[0]);
  b.end_chunk();
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  return path;
}

TEST(ReportData, IterationsAndPhasesAsTimeSpans) {
  Report r = report_of(training_loop("report-iterations.mtrace"), ReportDataOptions{});
  const json& it = r.data["iterations"];
  EXPECT_EQ(it["source"], "python loop train.py:11 train");
  constexpr int64_t kMs = 1'000'000;
  auto phase = [](const char* name, int64_t begin_ms, int64_t end_ms) {
    return json{{"phase", name}, {"begin_ns", begin_ms * kMs}, {"end_ns", end_ms * kMs}};
  };
  auto span = [](int index, int64_t begin_ms, int64_t end_ms, json phases) {
    return json{{"index", index}, {"begin_ns", begin_ms * kMs}, {"end_ns", end_ms * kMs}, {"phases", phases}};
  };
  json expected = json::array();
  expected.push_back(span(1, 2, 11, {phase("forward", 2, 4), phase("backward", 4, 8), phase("optimizer", 8, 11)}));
  expected.push_back(
      span(2, 11, 18, {phase("forward", 11, 13), phase("backward", 13, 16), phase("optimizer", 16, 18)}));
  expected.push_back(
      span(3, 18, 25, {phase("forward", 18, 20), phase("backward", 20, 23), phase("optimizer", 23, 25)}));
  EXPECT_EQ(it["spans"], expected);
  // Leak candidates at finalizing (event 24): X1..X3 of train.py:11 kept 1 MiB per iteration.
  bool found = false;
  for (const json& leak : r.data["leaks"])
    if (leak["label"] == "train.py:11 train") {
      found = true;
      EXPECT_EQ(leak["live_bytes"], 3 << 20);
      EXPECT_EQ(leak["allocations"], 3);
      EXPECT_EQ(leak["growth_per_iteration_bytes"], 1 << 20);
    }
  EXPECT_TRUE(found) << r.data["leaks"].dump();
  ASSERT_EQ(r.data["traps"].size(), 1u);
  EXPECT_EQ(r.data["traps"][0]["kind"], "kept_tensor");
}

TEST(ReportData, AnOomWithItsDiagnosis) {
  test::TraceBuilder b;
  b.start();
  b.python_frame(1, "train.py", "main", 7).stack(1, {kPy | 1});
  b.event(test::driver_alloc(0, 0x1000, 1 << 30, 1000, 1));
  // 200 GiB asked of a device of 80 GiB with 79 GiB free: larger than the device, which says it all.
  proto::Event oom = test::make_event(proto::OOM, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0, 200ull << 30, 500, 1);
  oom.set_device_free_bytes(79ull << 30);
  oom.set_device_total_bytes(80ull << 30);
  oom.set_result(2);
  b.event(oom);
  b.end(2, 0).end_chunk();
  const std::string path = test::temp_path("report-oom.mtrace");
  test::write_file(path, b.bytes());
  Report r = report_of(path, ReportDataOptions{});
  json expected = {{{"time_ns", 1500},
                    {"device", 0},
                    {"requested_bytes", 200ull << 30},
                    {"api", "CUDA_MALLOC"},
                    {"label", "train.py:7 main"},
                    {"stack", {"train.py:7 main"}},
                    {"diagnosis",
                     "the request alone is larger than the device: 200.00 GiB requested, the device "
                     "has 80.00 GiB in all"}}};
  EXPECT_EQ(r.data["ooms"], expected);
}

TEST(ReportData, NoIntegerAboveJavaScriptsExactRange) {
  test::TraceBuilder b;
  b.start();
  b.event(test::driver_alloc(0, 0x1000, uint64_t(1) << 60, 1000, 0));  // no tracer writes this
  b.end(1, 0).end_chunk();
  const std::string path = test::temp_path("report-huge.mtrace");
  test::write_file(path, b.bytes());
  Report r = report_of(path, ReportDataOptions{});
  const int64_t max = (int64_t(1) << 53) - 1;
  EXPECT_EQ(r.data["devices"][0]["timeline"]["peaks"]["allocated"]["bytes"], max);
  EXPECT_EQ(r.data["devices"][0]["timeline"]["levels"][0]["allocated_max"].back(), max);
  EXPECT_EQ(r.data["devices"][0]["flame_at_peak"]["value"], max);
}

TEST(ReportData, AFrameNameCannotEndTheEmbeddedData) {
  const std::string hostile = "</script><script>alert(1)</script><!--<script>";
  test::TraceBuilder b;
  b.start();
  b.python_frame(1, "</SCRIPT>.py", hostile, 1).stack(1, {kPy | 1});
  b.event(test::driver_alloc(0, 0x1000, 4096, 1000, 1));
  b.end(1, 0).end_chunk();
  const std::string path = test::temp_path("report-hostile.mtrace");
  test::write_file(path, b.bytes());
  Report r = report_of(path, ReportDataOptions{});
  std::ostringstream page;
  write_report_html(r.data, page);
  const std::string html = page.str();
  const std::string open = "<script id=\"memtrace-data\" type=\"application/json\">";
  size_t begin = html.find(open);
  ASSERT_NE(begin, std::string::npos);
  begin += open.size();
  // The data holds no '<' at all: the first "</script>" (in any case) after it is the element's own end.
  size_t end = html.find("</script>", begin);
  ASSERT_NE(end, std::string::npos);
  const std::string embedded = html.substr(begin, end - begin);
  EXPECT_EQ(embedded.find('<'), std::string::npos);
  const json back = json::parse(embedded);
  EXPECT_EQ(back, r.data);
  EXPECT_EQ(back["devices"][0]["sites"][0]["label"], "</SCRIPT>.py:1 " + hostile);
}

TEST(ReportCommand, WritesThePageAndRefusesBadInputInOneLine) {
  const std::string trace = three_sites("report-cli.mtrace"), html = test::temp_path("report-cli.html");
  test::MemtraceRun r = test::run_memtrace_binary("report " + trace + " -o " + html);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  std::ifstream in(html);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<script id=\"memtrace-data\" type=\"application/json\">{"), std::string::npos);
  r = test::run_memtrace_binary("report " + trace);
  EXPECT_EQ(r.exit_code, 1);
  const std::string junk = test::temp_path("report-junk.mtrace");
  test::write_file(junk, "not a trace");
  r = test::run_memtrace_binary("report " + junk + " -o " + html);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
  EXPECT_NE(r.err.find(junk), std::string::npos) << r.err;
}

}  // namespace
}  // namespace memtrace
