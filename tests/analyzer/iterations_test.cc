// Iterations and phases found from the Python loop and from NVTX ranges (analysis/iterations.h), growth per
// iteration, the growing sites under the user's line and the traps (analysis/iteration_report.h, traps.h), on
// traces built here with every figure worked out by hand.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "analysis/analysis.h"
#include "analysis/iteration_report.h"
#include "analysis/iterations.h"
#include "analysis/traps.h"
#include "report/text/iterations_text.h"
#include "report/text/report_text.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kPy = 1ull << 63;
constexpr int64_t kMs = 1'000'000;
constexpr uint64_t kReserved = 32 * kMiB;
constexpr const char* kTorch = "/venv/lib/python3.12/site-packages/torch/";

// Builds a PyTorch-style trace of device 0, one event per ms, keeping the allocated total the events carry.
class Job {
 public:
  Job() { b_.start(); }
  test::TraceBuilder& builder() { return b_; }
  // A stack of Python frames given outermost first (the trace lists them innermost first).
  Job& stack(uint64_t id, std::vector<uint64_t> frames_outermost_first) {
    std::vector<uint64_t> frames;
    for (auto it = frames_outermost_first.rbegin(); it != frames_outermost_first.rend(); ++it)
      frames.push_back(kPy | *it);
    b_.stack(id, frames);
    return *this;
  }
  Job& frame(uint64_t id, const std::string& file, const std::string& function, uint32_t line) {
    b_.python_frame(id, file, function, line);
    return *this;
  }
  Job& alloc(uint64_t address, uint64_t size, uint64_t stack_id, uint32_t tid = 1, uint64_t reserved = kReserved) {
    live_[address] = size;
    allocated_ += size;
    proto::Event e = test::torch_event(proto::ALLOC, 0, address, size, allocated_, reserved, kMs, stack_id);
    e.set_tid(tid);
    b_.event(e);
    return *this;
  }
  Job& free(uint64_t address, uint32_t tid = 1, uint64_t reserved = kReserved) {
    allocated_ -= live_.at(address);
    proto::Event e = test::torch_event(proto::FREE, 0, address, live_.at(address), allocated_, reserved, kMs);
    live_.erase(address);
    e.set_tid(tid);
    b_.event(e);
    return *this;
  }
  Job& finalizing() {
    b_.event(test::finalizing(kMs));
    return *this;
  }
  std::string write(const std::string& name) {
    b_.end_chunk();
    std::string path = test::temp_path(name);
    test::write_file(path, b_.bytes());
    return path;
  }

 private:
  test::TraceBuilder b_;
  std::map<uint64_t, uint64_t> live_;
  uint64_t allocated_ = 0;
};

struct Found {
  std::unique_ptr<Analysis> analysis;
  std::unique_ptr<Symbolizer> symbolizer;
  std::unique_ptr<FrameResolver> resolver;
  IterationReport report;
};

Found analyze(const std::string& path, const std::vector<NvtxRange>& nvtx = {}) {
  Found f;
  f.analysis = analyze_trace(path, false);
  f.symbolizer = std::make_unique<Symbolizer>(f.analysis->stacks.modules());
  f.resolver = std::make_unique<FrameResolver>(f.analysis->stacks, *f.symbolizer);
  f.report = analyze_iterations(*f.analysis, *f.resolver, nvtx);
  return f;
}

// A training loop of 3 iterations in train.py's `train` (lines 11-14), after a set-up line 5:
//   e0        P 8 MiB, train:5 (parameters)                                    allocated  8 MiB
//   it 1  e1  X1 1 MiB, train:11 (kept: the leak)                  forward             9
//         e2  A 2 MiB, train:12 > torch module.py (activation)     forward            11
//         e3  s 512 B, train:13 > torch/autograd/__init__.py backward  backward       11 MiB + 512
//         e4  G 2 MiB, worker thread 2, no stack (gradient)         backward (in effect) 13 MiB + 512
//         e5  free A, worker thread, no stack                       backward           11 MiB + 512
//         e6  free s, no stack                                      backward           11
//         e7  S 4 MiB, train:14 > torch/optim/adam.py step (state)  optimizer          15
//         e8  T 1 MiB, train:14 > adam.py step (temporary)          optimizer          16  <- peak of it 1
//         e9  free T, no stack                                      optimizer          15  <- end of it 1
//   it 2  e10 X2, e11 A, e12 s, e13 free A (worker), e14 free s, e15 T, e16 free T     16 at end
//         (peak 18 MiB + 512 after e12, backward)
//   it 3  e17 X3, e18 A, e19 s, e20 free A (worker), e21 free s, e22 T, e23 free T     17 at end
//   e24 PYTHON_FINALIZING, e25 free X1
// Each iteration has 1 event after its last one in the loop frame (the free of T): the last iteration ends after
// e22 + 1 = e23, before the finalization.
std::string training_loop(const std::string& name) {
  Job j;
  j.frame(1, "train.py", "<module>", 30).frame(2, "train.py", "train", 5).frame(3, "train.py", "train", 11);
  j.frame(4, "train.py", "train", 12).frame(5, std::string(kTorch) + "nn/modules/module.py", "Module._call_impl", 1790);
  j.frame(6, "train.py", "train", 13).frame(7, std::string(kTorch) + "autograd/__init__.py", "backward", 374);
  j.frame(8, "train.py", "train", 14).frame(9, std::string(kTorch) + "optim/adam.py", "Adam.step", 238);
  j.stack(20, {1, 2}).stack(21, {1, 3}).stack(22, {1, 4, 5}).stack(23, {1, 6, 7}).stack(24, {1, 8, 9});
  j.alloc(0x1000000, 8 * kMiB, 20);
  uint64_t x[3] = {0x2000000, 0x2100000, 0x2200000};
  for (int k = 0; k < 3; ++k) {
    j.alloc(x[k], kMiB, 21).alloc(0x3000000, 2 * kMiB, 22).alloc(0x4000000, 512, 23);
    if (k == 0) j.alloc(0x5000000, 2 * kMiB, 0, /*tid=*/2);
    j.free(0x3000000, /*tid=*/2).free(0x4000000);
    if (k == 0) j.alloc(0x6000000, 4 * kMiB, 24);
    j.alloc(0x7000000, kMiB, 24).free(0x7000000);
  }
  j.finalizing().free(x[0]);
  return j.write(name);
}

TEST(Iterations, TrainingLoopFromThePythonLoop) {
  Found f = analyze(training_loop("iterations-train.mtrace"));
  const EventPhases& p = f.report.phases;
  EXPECT_EQ(p.source, IterationSource::kPythonLoop);
  EXPECT_EQ(p.loop_file, "train.py");
  EXPECT_EQ(p.loop_function, "train");
  EXPECT_EQ(p.loop_line, 11u);
  ASSERT_EQ(p.iterations.size(), 3u);
  EXPECT_EQ(p.iterations[0].first_event, 1u);
  EXPECT_EQ(p.iterations[0].end_event, 10u);
  EXPECT_EQ(p.iterations[1].first_event, 10u);
  EXPECT_EQ(p.iterations[1].end_event, 17u);
  EXPECT_EQ(p.iterations[2].first_event, 17u);
  EXPECT_EQ(p.iterations[2].end_event, 24u);
  EXPECT_EQ(p.iterations[0].begin_ns, 2 * kMs);  // e1 at 2 ms
  EXPECT_EQ(p.iterations[2].end_ns, 25 * kMs);   // e24's time
  ASSERT_EQ(p.phase_of_event.size(), 26u);
  using enum Phase;
  std::vector<Phase> expected = {kOutside,   kForward,   kForward,   kBackward, kBackward, kBackward, kBackward,
                                 kOptimizer, kOptimizer, kOptimizer, kForward,  kForward,  kBackward, kBackward,
                                 kBackward,  kOptimizer, kOptimizer, kForward,  kForward,  kBackward, kBackward,
                                 kBackward,  kOptimizer, kOptimizer, kOutside,  kOutside};
  EXPECT_EQ(p.phase_of_event, expected);
  EXPECT_EQ(p.iteration_of_event[0], -1);
  EXPECT_EQ(p.iteration_of_event[9], 0);
  EXPECT_EQ(p.iteration_of_event[23], 2);
  EXPECT_EQ(p.iteration_of_event[24], -1);
  EXPECT_EQ(iterations_found_text(p), "3 iterations, from the loop in train whose body starts at train.py:11");

  const IterationFigures& m = f.report.figures;
  EXPECT_EQ(m.device, 0);
  ASSERT_EQ(m.iterations.size(), 3u);
  EXPECT_EQ(m.iterations[0].allocated_at_end_bytes, 15 * kMiB);
  EXPECT_EQ(m.iterations[1].allocated_at_end_bytes, 16 * kMiB);
  EXPECT_EQ(m.iterations[2].allocated_at_end_bytes, 17 * kMiB);
  EXPECT_EQ(m.iterations[0].peak_allocated_bytes, 16 * kMiB);
  EXPECT_EQ(m.iterations[0].peak_phase, kOptimizer);
  EXPECT_EQ(m.iterations[0].peak_event, 8u);
  EXPECT_EQ(m.iterations[1].peak_allocated_bytes, 18 * kMiB + 512);
  EXPECT_EQ(m.iterations[1].peak_phase, kBackward);
  EXPECT_EQ(m.iterations[2].peak_allocated_bytes, 19 * kMiB + 512);
  EXPECT_EQ(m.iterations[2].reserved_at_end_bytes, kReserved);
  EXPECT_EQ(m.allocated_growth_per_iteration_bytes, int64_t(kMiB));  // 17 - 16: the deltas from the 2nd on
  EXPECT_EQ(m.reserved_growth_per_iteration_bytes, 0);
  // What the iterations kept to e23: X1..X3 (train:11, 1 MiB each), G and S (iteration 1 only).
  ASSERT_EQ(f.report.groups.size(), 1u);
  const LeakGroup& g = f.report.groups[0];
  EXPECT_EQ(g.file, "train.py");
  EXPECT_EQ(g.line, 11u);
  EXPECT_EQ(g.growth_per_iteration_bytes, kMiB);
  ASSERT_EQ(g.sites.size(), 1u);
  EXPECT_EQ(g.sites[0].stack_id, 21u);
  EXPECT_EQ(g.sites[0].kept_bytes, 3 * kMiB);
  EXPECT_TRUE(g.libraries.empty());
  // One forward site kept (X, 1 MiB per iteration): a stored tensor, not a graph.
  ASSERT_EQ(f.report.traps.size(), 1u);
  EXPECT_EQ(f.report.traps[0].kind, TrapKind::kKeptTensor);
  EXPECT_EQ(f.report.traps[0].title,
            "a tensor kept per iteration: the output of train.py:11 train, 1.00 MiB (1,048,576 B) each, is still "
            "referenced after its iteration");

  std::ostringstream text;
  TextOptions options;
  options.top = 1;
  print_iterations(text, f.report, options);
  EXPECT_EQ(text.str(),
            "\nIterations: 3 iterations, from the loop in train whose body starts at train.py:11 (device 0)\n"
            "  growth per iteration: allocated +1.00 MiB (1,048,576 B), reserved +0 B (median of the changes from "
            "one iteration's end to the next, from the 2nd iteration on)\n"
            "    #1 peak allocated 16.00 MiB (16,777,216 B) in optimizer, allocated at end 15.00 MiB (15,728,640 B)\n"
            "    ... 1 iteration not shown\n"
            "    #3 peak allocated 19.00 MiB (19,923,456 B) in backward, allocated at end 17.00 MiB (17,825,792 B)\n");
}

TEST(Iterations, LeakSitesGrowPerIteration) {
  Found f = analyze(training_loop("iterations-train-leaks.mtrace"));
  // Live at Python finalization (e24): X1..X3 (stack 21), G (no stack), S (stack 24), P (stack 20).
  const auto& leaks = f.analysis->leaks;
  ASSERT_EQ(f.report.leak_growth_per_iteration_bytes.size(), leaks.size());
  for (size_t i = 0; i < leaks.size(); ++i)
    EXPECT_EQ(f.report.leak_growth_per_iteration_bytes[i], leaks[i].site.stack_id == 21 ? kMiB : 0)
        << "stack " << leaks[i].site.stack_id;
  std::ostringstream text;
  TextOptions options;
  print_leaks(text, *f.analysis, *f.resolver, options, &f.report);
  EXPECT_NE(text.str().find("\nGrowth per iteration by the user's line (what each iteration kept to the last one's "
                            "end; 3 iterations, from the loop in train whose body starts at train.py:11):\n"
                            "  train.py:11 train: +1.00 MiB (1,048,576 B) per iteration across 1 allocation site\n"
                            "    +1.00 MiB (1,048,576 B) per iteration: train.py:11 train\n"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("in 3 allocations, GROWS 1.00 MiB (1,048,576 B) per iteration\n"), std::string::npos)
      << text.str();
  EXPECT_EQ(text.str().find("step after step"), std::string::npos);
}

// `for ...: step()` in main (line 21, constant): the loop's body is step (lines 40, 41); a new call is a new
// iteration. A set-up event at main:19 first.
TEST(Iterations, LoopWhoseBodyIsAFunctionCall) {
  Job j;
  j.frame(1, "job.py", "<module>", 60).frame(2, "job.py", "main", 19).frame(3, "job.py", "main", 21);
  j.frame(4, "job.py", "step", 40).frame(5, "job.py", "step", 41);
  j.stack(10, {1, 2}).stack(11, {1, 3, 4}).stack(12, {1, 3, 5});
  j.alloc(0x100000, kMiB, 10);
  for (uint64_t k = 0; k < 3; ++k) j.alloc(0x200000 + k * 0x100000, kMiB, 11).alloc(0x900000, kMiB, 12).free(0x900000);
  Found f = analyze(j.write("iterations-call.mtrace"));
  const EventPhases& p = f.report.phases;
  EXPECT_EQ(iterations_found_text(p), "3 iterations, from the loop in step whose body starts at job.py:40");
  ASSERT_EQ(p.iterations.size(), 3u);
  // Events: e0 set-up; e1 e2 e3, e4 e5 e6, e7 e8 e9. Each iteration has one free after its last step event.
  EXPECT_EQ(p.iterations[0].first_event, 1u);
  EXPECT_EQ(p.iterations[1].first_event, 4u);
  EXPECT_EQ(p.iterations[2].first_event, 7u);
  EXPECT_EQ(p.iterations[2].end_event, 10u);
  // Allocated at the ends: 2, 3, 4 MiB: growth 1 MiB per iteration; no backward: all forward.
  EXPECT_EQ(f.report.figures.allocated_growth_per_iteration_bytes, int64_t(kMiB));
  for (uint64_t i = 1; i < 10; ++i) EXPECT_EQ(p.phase_of_event[i], Phase::kForward) << i;
}

// A generation loop: gen:50 (embed) starts each pass, an inner loop at lines 52-53 runs twice per pass.
TEST(Iterations, InnerLoopDoesNotStartIterations) {
  Job j;
  j.frame(1, "gen.py", "<module>", 90).frame(2, "gen.py", "gen", 50).frame(3, "gen.py", "gen", 52);
  j.frame(4, "gen.py", "gen", 53);
  j.stack(10, {1, 2}).stack(11, {1, 3}).stack(12, {1, 4});
  for (uint64_t k = 0; k < 4; ++k) {
    j.alloc(0x100000, kMiB, 10);
    for (int layer = 0; layer < 2; ++layer)
      j.alloc(0x200000, kMiB, 11).alloc(0x300000, kMiB, 12).free(0x200000).free(0x300000);
    j.free(0x100000);
  }
  Found f = analyze(j.write("iterations-inner.mtrace"));
  const EventPhases& p = f.report.phases;
  EXPECT_EQ(iterations_found_text(p), "4 iterations, from the loop in gen whose body starts at gen.py:50");
  ASSERT_EQ(p.iterations.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(p.iterations[k].first_event, 10 * k);  // 10 events a pass: 1 + 2 x 4 + 1
    EXPECT_EQ(p.iterations[k].end_event, 10 * k + 10);
  }
  EXPECT_EQ(f.report.figures.allocated_growth_per_iteration_bytes, 0);
  EXPECT_TRUE(f.report.groups.empty());
}

TEST(Iterations, NvtxRangesAreTheIterationsAndNameThePhases) {
  std::string path = training_loop("iterations-nvtx.mtrace");
  auto range = [](const std::string& name, uint32_t depth, uint64_t first, uint64_t end) {
    NvtxRange r;
    r.name = name;
    r.tid = 1;
    r.depth = depth;
    r.first_event = first;
    r.end_event = end;
    return r;
  };
  // "step" x 3 at depth 0 (whole iterations, e0's set-up included in the first), "Forward" (a phase name, not
  // iterations though it repeats) and "bwd" at depth 1; "bwd" of the 1st step reaches over e7, which the frames
  // call optimizer.
  std::vector<NvtxRange> nvtx = {range("step", 0, 0, 10),     range("Forward", 1, 0, 3),   range("bwd", 1, 3, 8),
                                 range("step", 0, 10, 17),    range("Forward", 1, 10, 12), range("step", 0, 17, 24),
                                 range("Forward", 1, 17, 19), range("other", 2, 3, 4)};
  Found f = analyze(path, nvtx);
  const EventPhases& p = f.report.phases;
  EXPECT_EQ(p.source, IterationSource::kNvtx);
  EXPECT_EQ(iterations_found_text(p), "3 iterations, from NVTX ranges \"step\"");
  ASSERT_EQ(p.iterations.size(), 3u);
  EXPECT_EQ(p.iterations[0].first_event, 0u);
  EXPECT_EQ(p.iterations[0].end_event, 10u);
  EXPECT_EQ(p.phase_of_event[0], Phase::kForward);   // "Forward"
  EXPECT_EQ(p.phase_of_event[7], Phase::kBackward);  // "bwd" over the frames' optimizer
  EXPECT_EQ(p.phase_of_event[8], Phase::kOptimizer);
  EXPECT_EQ(f.report.figures.allocated_growth_per_iteration_bytes, int64_t(kMiB));
}

// No loop: every event at one line, its leak site growing by time: reports fall back to time and say so.
TEST(Iterations, NoLoopFallsBackToTime) {
  Job j;
  j.frame(1, "job.py", "<module>", 5).frame(2, "job.py", "run", 9);
  j.stack(10, {1, 2});
  for (uint64_t k = 0; k < 4; ++k) j.alloc(0x100000 * (k + 1), kMiB, 10);
  Found f = analyze(j.write("iterations-none.mtrace"));
  EXPECT_EQ(f.report.phases.source, IterationSource::kNone);
  EXPECT_TRUE(f.report.phases.iterations.empty());
  EXPECT_TRUE(f.report.phases.phase_of_event.empty());
  EXPECT_TRUE(f.report.phases.iteration_of_event.empty());
  EXPECT_EQ(iterations_found_text(f.report.phases), "no iterations found");
  std::ostringstream text;
  print_iterations(text, f.report, TextOptions{});
  EXPECT_EQ(text.str(), "");
  print_leaks(text, *f.analysis, *f.resolver, TextOptions{}, &f.report);
  EXPECT_NE(text.str().find("  No iterations found (no repeating loop in the Python frames, no NVTX ranges): "
                            "growth is measured by time, step after step.\n"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("GROWS step after step: 4 allocations"), std::string::npos) << text.str();
}

// An evaluation loop without no_grad that keeps its outputs: every pass keeps a linear layer's and an
// activation's allocations (in torch and transformers) under eval.py:26; eval.py:25 makes the input, freed.
std::string kept_graph_loop(const std::string& name, bool with_activation_site) {
  Job j;
  j.frame(1, "eval.py", "<module>", 40).frame(2, "eval.py", "evaluate", 25).frame(3, "eval.py", "evaluate", 26);
  j.frame(4, std::string(kTorch) + "nn/modules/linear.py", "Linear.forward", 134);
  j.frame(5, "/venv/lib/python3.12/site-packages/transformers/activations.py", "GELU.forward", 66);
  j.stack(10, {1, 2}).stack(11, {1, 3, 4}).stack(12, {1, 3, 5});
  for (uint64_t k = 0; k < 4; ++k) {
    j.alloc(0x100000, kMiB, 10).alloc(0x1000000 + k * 0x1000000, 4 * kMiB, 11);
    if (with_activation_site) j.alloc(0x800000 + k * 0x1000000, 2 * kMiB, 12);
    j.free(0x100000);
  }
  return j.write(name);
}

TEST(Iterations, GrowingSitesRolledUpUnderTheUsersLineAndTheKeptGraph) {
  Found f = analyze(kept_graph_loop("iterations-kept-graph.mtrace", true));
  EXPECT_EQ(iterations_found_text(f.report.phases),
            "4 iterations, from the loop in evaluate whose body starts at eval.py:25");
  EXPECT_EQ(f.report.figures.allocated_growth_per_iteration_bytes, int64_t(6 * kMiB));
  ASSERT_EQ(f.report.groups.size(), 1u);
  const LeakGroup& g = f.report.groups[0];
  EXPECT_EQ(g.line, 26u);
  EXPECT_EQ(g.function, "evaluate");
  EXPECT_EQ(g.growth_per_iteration_bytes, 6 * kMiB);
  ASSERT_EQ(g.sites.size(), 2u);
  EXPECT_EQ(g.sites[0].stack_id, 11u);
  EXPECT_EQ(g.sites[0].growth_per_iteration_bytes, 4 * kMiB);
  EXPECT_EQ(g.sites[1].stack_id, 12u);
  EXPECT_EQ(g.sites[1].growth_per_iteration_bytes, 2 * kMiB);
  EXPECT_EQ(g.libraries, (std::vector<std::string>{"torch", "transformers"}));
  ASSERT_EQ(f.report.traps.size(), 1u);
  const Trap& t = f.report.traps[0];
  EXPECT_EQ(t.kind, TrapKind::kKeptGraph);
  EXPECT_EQ(t.kept_per_iteration_bytes, 6 * kMiB);
  EXPECT_EQ(t.kept_sites, 2u);
  EXPECT_EQ(t.title,
            "a graph kept alive across iterations: 6.00 MiB (6,291,456 B) of forward allocations per iteration at 2 "
            "call sites stay live");
  std::ostringstream text;
  TextOptions options;
  print_leak_groups(text, *f.analysis, f.report, *f.resolver, options);
  EXPECT_NE(text.str().find("  eval.py:26 evaluate: +6.00 MiB (6,291,456 B) per iteration across 2 allocation sites "
                            "in torch, transformers\n"),
            std::string::npos)
      << text.str();
}

// One site keeps 4 MiB per pass (the linear layer's output under eval.py:26): no graph, a kept tensor, named by
// the user's line.
TEST(Iterations, OneKeptSiteIsAKeptTensorNotAGraph) {
  Found f = analyze(kept_graph_loop("iterations-one-site.mtrace", false));
  EXPECT_EQ(f.report.figures.allocated_growth_per_iteration_bytes, int64_t(4 * kMiB));
  ASSERT_EQ(f.report.traps.size(), 1u);
  const Trap& t = f.report.traps[0];
  EXPECT_EQ(t.kind, TrapKind::kKeptTensor);
  EXPECT_STREQ(trap_json_name(t.kind), "kept_tensor");
  EXPECT_EQ(t.kept_per_iteration_bytes, 4 * kMiB);
  EXPECT_EQ(t.kept_sites, 1u);
  EXPECT_EQ(t.title,
            "a tensor kept per iteration: the output of eval.py:26 evaluate, 4.00 MiB (4,194,304 B) each, is still "
            "referenced after its iteration");
  EXPECT_EQ(t.advice,
            "A list or attribute keeps one per iteration (`outputs.append(out)`, `losses.append(loss)`): store "
            "`.item()` or a CPU copy (`.cpu()`) instead, or drop the reference when the iteration ends.");
  std::ostringstream text;
  print_traps(text, f.report);
  EXPECT_EQ(text.str(), "\nTraps:\n  " + t.title + "\n    " + t.advice + "\n");
}

// A trap's title can name the user's line, which is the traced program's text: printed escaped.
TEST(Iterations, TrapTextIsPrintedEscaped) {
  IterationReport report;
  Trap t;
  t.kind = TrapKind::kKeptTensor;
  t.title = "the output of \x1b]0;title\x07job.py:3 step\n";
  t.advice = "keep `.item()`";
  report.traps.push_back(t);
  std::ostringstream text;
  print_traps(text, report);
  EXPECT_EQ(text.str(), "\nTraps:\n  the output of \\x1b]0;title\\x07job.py:3 step\\n\n    keep `.item()`\n");
}

TEST(Iterations, SteadyGrowthIsTheMedianFromTheSecondIteration) {
  EXPECT_EQ(steady_growth({}), std::nullopt);
  EXPECT_EQ(steady_growth({7}), std::nullopt);
  EXPECT_EQ(steady_growth({10, 30}), 20);             // two: their one delta
  EXPECT_EQ(steady_growth({10, 100, 105, 120}), 10);  // deltas 5, 15 (90 skipped): mean of the middle two
  EXPECT_EQ(steady_growth({10, 100, 95, 85}), -7);    // -5, -10: -7.5 rounded toward zero
  EXPECT_EQ(steady_growth({0, 50, 52, 54, 90}), 2);   // 2, 2, 36
  EXPECT_EQ(median_from_second({9, 1, 1, 0}), 1u);    // 1, 1, 0
  EXPECT_EQ(median_from_second({9, 0, 4}), 2u);       // 0, 4
  EXPECT_EQ(median_from_second({9}), 0u);
}

IterationFigures figures_of(std::vector<std::pair<uint64_t, uint64_t>> allocated_reserved_at_end) {
  IterationFigures f;
  f.device = 0;
  std::vector<uint64_t> allocated, reserved;
  for (auto [a, r] : allocated_reserved_at_end) {
    IterationMemory m;
    m.allocated_at_end_bytes = a;
    m.reserved_at_end_bytes = r;
    f.iterations.push_back(m);
    allocated.push_back(a);
    reserved.push_back(r);
  }
  f.allocated_growth_per_iteration_bytes = steady_growth(allocated);
  f.reserved_growth_per_iteration_bytes = steady_growth(reserved);
  return f;
}

TEST(Traps, CacheNotALeak) {
  // Allocated flat at 100 MiB, reserved 1 GiB: 10 times allocated and 924 MiB above it.
  std::vector<Trap> traps =
      find_traps(figures_of({{100 * kMiB, 1024 * kMiB}, {100 * kMiB, 1024 * kMiB}, {100 * kMiB, 1024 * kMiB}}), {});
  ASSERT_EQ(traps.size(), 1u);
  EXPECT_EQ(traps[0].kind, TrapKind::kCacheNotLeak);
  EXPECT_EQ(traps[0].allocated_bytes, 100 * kMiB);
  EXPECT_EQ(traps[0].reserved_bytes, 1024 * kMiB);
  EXPECT_EQ(traps[0].title,
            "a cache, not a leak: 1.00 GiB (1,073,741,824 B) reserved for 100.00 MiB (104,857,600 B) allocated, "
            "allocated flat across iterations");
  // Absent: reserved only 1.5 times allocated; or allocated growing 4 MiB per iteration.
  EXPECT_TRUE(find_traps(figures_of({{600 * kMiB, 900 * kMiB}, {600 * kMiB, 900 * kMiB}}), {}).empty());
  EXPECT_TRUE(
      find_traps(figures_of({{100 * kMiB, 1024 * kMiB}, {104 * kMiB, 1024 * kMiB}, {108 * kMiB, 1024 * kMiB}}), {})
          .empty());
}

TEST(Traps, AllocatorRetention) {
  // Allocated flat at 100 MiB; reserved 120, 140, 160 MiB: +20 MiB per iteration.
  std::vector<Trap> traps =
      find_traps(figures_of({{100 * kMiB, 120 * kMiB}, {100 * kMiB, 140 * kMiB}, {100 * kMiB, 160 * kMiB}}), {});
  ASSERT_EQ(traps.size(), 1u);
  EXPECT_EQ(traps[0].kind, TrapKind::kAllocatorRetention);
  EXPECT_EQ(traps[0].reserved_growth_per_iteration_bytes, int64_t(20 * kMiB));
  EXPECT_EQ(traps[0].allocated_growth_per_iteration_bytes, 0);
  EXPECT_EQ(traps[0].title,
            "allocator retention: reserved grows 20.00 MiB (20,971,520 B) per iteration while allocated does not");
  // Absent where allocated grows with it.
  EXPECT_TRUE(find_traps(figures_of({{100 * kMiB, 120 * kMiB}, {120 * kMiB, 140 * kMiB}, {140 * kMiB, 160 * kMiB}}), {})
                  .empty());
}

TEST(Traps, KeptGraphWordingWithAndWithoutBackward) {
  IterationFigures f = figures_of({{10 * kMiB, 32 * kMiB}, {20 * kMiB, 32 * kMiB}, {30 * kMiB, 32 * kMiB}});
  ForwardKept kept{{10 * kMiB, 10 * kMiB, 10 * kMiB}, 3, false};
  std::vector<Trap> traps = find_traps(f, kept);
  ASSERT_EQ(traps.size(), 1u);
  EXPECT_EQ(traps[0].kept_per_iteration_bytes, 10 * kMiB);
  EXPECT_NE(traps[0].advice.find("without torch.no_grad()"), std::string::npos);
  kept.backward_seen = true;
  EXPECT_NE(find_traps(f, kept)[0].advice.find("retain_graph"), std::string::npos);
  // One site: no graph; a kept tensor only where that site's bytes are known (here without Python frames).
  kept.sites_every_iteration = 1;
  EXPECT_TRUE(find_traps(f, kept).empty());
  kept.lone_site_per_iteration_bytes = 512;
  traps = find_traps(f, kept);
  ASSERT_EQ(traps.size(), 1u);
  EXPECT_EQ(traps[0].kind, TrapKind::kKeptTensor);
  EXPECT_EQ(traps[0].title,
            "a tensor kept per iteration: the output of one call site, 512 B each, is still referenced after its "
            "iteration");
  EXPECT_TRUE(find_traps(IterationFigures{}, ForwardKept{{10 * kMiB, 10 * kMiB}, 3, false}).empty());  // no iterations
}

}  // namespace
}  // namespace memtrace
