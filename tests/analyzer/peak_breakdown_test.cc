// The peak breakdown (analysis/peak_breakdown.h), the tree by user line (analysis/live_tree.h) and `memtrace peak`,
// on a two-iteration training trace built by hand with hand-made EventPhases. Every figure worked out below.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/live_tree.h"
#include "analysis/peak_breakdown.h"
#include "analysis_trace.h"
#include "report/text/peak_text.h"

namespace memtrace {
namespace {

using test::kMiB;
using test::kPy;
constexpr int64_t ms = 1'000'000;

// Device 0, one event per ms (event i at i + 1 ms); PyTorch reserved 64 MiB throughout. MiB figures:
//   e0  cudaMalloc segment 64 (stack 11)         e1 cuMemAlloc 4 in libcublas (stack 20)   e2 cudaMalloc 2 (stack 21)
//   e3  P  6  parameter (stack 11)                                                   allocated  6
//   iteration 1 = events [4, 13)
//   e4  A1 4  forward (stack 12)     10      e5 T1 1 forward (stack 12) 11      e6 free T1 (forward)  10
//   e7  K1 2  forward, never freed (stack 12)                                                     12
//   e8  G  8  backward, never freed (stack 13: no Python frames)                                 20
//   e9  free A1 (backward)           16      e10 S 16 optimizer (stack 14) 32   e11 O 1 optimizer (stack 14) 33
//   e12 free O (optimizer)           32
//   iteration 2 = events [13, 19)
//   e13 A2 4  forward (stack 12)     36      e14 K2 2 forward, never freed (stack 12)                 38
//   e15 B2 1  backward (stack 10)    39 <- peak allocated
//   e16 free A2 (backward)           35      e17 free B2 (backward) 34           e18 X 1 other phase, kept  35
//   after the loop: e19 free S       19      e20 DEVICE_USAGE: process 200 MiB (driver 70 MiB: context 130 MiB)
// Stacks: 10 = train.py:42 train_step <- train.py:50 <module>; 11 = train.py:50 <module>;
// 12 = site-packages/torch/nn/linear.py:134 Linear.forward <- train.py:42 <- train.py:50; 13 = one native frame in
// libtorch_cpu.so; 14 = site-packages/torch/optim/adam.py:178 Adam._init_group <- train.py:45 train_step <- :50;
// 20 = a native frame in libcublas.so.13; 21 = none (stack id never defined).
constexpr uint64_t kSegment = 0x10000000;
constexpr uint64_t kP = kSegment, kA1 = kSegment + 8 * kMiB, kT1 = kSegment + 12 * kMiB, kK1 = kSegment + 13 * kMiB,
                   kG = kSegment + 16 * kMiB, kS = kSegment + 24 * kMiB, kO = kSegment + 40 * kMiB,
                   kA2 = kSegment + 8 * kMiB, kK2 = kSegment + 42 * kMiB, kB2 = kSegment + 44 * kMiB,
                   kX = kSegment + 45 * kMiB;

proto::Event block(proto::EventKind kind, uint64_t address, uint64_t size, uint64_t allocated_mib,
                   uint64_t stack = 0) {
  return test::torch_event(kind, 0, address, size, allocated_mib * kMiB, 64 * kMiB, ms, stack);
}

std::string training_trace() {
  test::TraceBuilder b;
  b.start();
  proto::Record module;
  module.mutable_module()->set_path("/usr/lib/libcublas.so.13");
  module.mutable_module()->set_load_address(0x7000000);
  module.mutable_module()->set_start(0x7000000);
  module.mutable_module()->set_end(0x8000000);
  b.record(module);
  module.mutable_module()->set_path("/usr/lib/libtorch_cpu.so");
  module.mutable_module()->set_load_address(0x9000000);
  module.mutable_module()->set_start(0x9000000);
  module.mutable_module()->set_end(0xA000000);
  b.record(module);
  b.python_frame(1, "train.py", "train_step", 42).python_frame(2, "train.py", "<module>", 50);
  b.python_frame(3, "/venv/lib/python3.12/site-packages/torch/nn/linear.py", "Linear.forward", 134);
  b.python_frame(4, "/venv/lib/python3.12/site-packages/torch/optim/adam.py", "Adam._init_group", 178);
  b.python_frame(5, "train.py", "train_step", 45);
  b.stack(10, {kPy | 1, kPy | 2}).stack(11, {kPy | 2}).stack(12, {kPy | 3, kPy | 1, kPy | 2});
  b.stack(13, {0x9000100}).stack(14, {kPy | 4, kPy | 5, kPy | 2}).stack(20, {0x7000100}).end_chunk();
  b.event(test::driver_alloc(0, kSegment, 64 * kMiB, ms, 11));                       // e0
  b.event(test::driver_alloc(0, 0x90000000, 4 * kMiB, ms, 20, proto::CU_MEM_ALLOC));  // e1
  b.event(test::driver_alloc(0, 0xA0000000, 2 * kMiB, ms, 21));                      // e2
  b.event(block(proto::ALLOC, kP, 6 * kMiB, 6, 11));                                 // e3
  b.event(block(proto::ALLOC, kA1, 4 * kMiB, 10, 12));                               // e4
  b.event(block(proto::ALLOC, kT1, kMiB, 11, 12));                                   // e5
  b.event(block(proto::FREE, kT1, 0, 10));                                           // e6
  b.event(block(proto::ALLOC, kK1, 2 * kMiB, 12, 12));                               // e7
  b.event(block(proto::ALLOC, kG, 8 * kMiB, 20, 13));                                // e8
  b.event(block(proto::FREE, kA1, 0, 16));                                           // e9
  b.event(block(proto::ALLOC, kS, 16 * kMiB, 32, 14));                               // e10
  b.event(block(proto::ALLOC, kO, kMiB, 33, 14));                                    // e11
  b.event(block(proto::FREE, kO, 0, 32)).end_chunk();                                // e12
  b.event(block(proto::ALLOC, kA2, 4 * kMiB, 36, 12));                               // e13
  b.event(block(proto::ALLOC, kK2, 2 * kMiB, 38, 12));                               // e14
  b.event(block(proto::ALLOC, kB2, kMiB, 39, 10));                                   // e15
  b.event(block(proto::FREE, kA2, 0, 35));                                           // e16
  b.event(block(proto::FREE, kB2, 0, 34));                                           // e17
  b.event(block(proto::ALLOC, kX, kMiB, 35, 10));                                    // e18
  b.event(block(proto::FREE, kS, 0, 19));                                            // e19
  proto::Event usage = test::make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, 0, 0, 0, ms);
  usage.set_device_free_bytes(1000 * kMiB);
  usage.set_device_total_bytes(1200 * kMiB);
  usage.set_process_used_bytes(200 * kMiB);
  usage.set_other_processes_used_bytes(0);
  b.event(usage).end_chunk();  // e20
  std::string path = test::temp_path("peak-breakdown.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

// The phases of training_trace(), as find_iterations would give them.
EventPhases training_phases() {
  EventPhases p;
  p.source = IterationSource::kPythonLoop;
  p.iterations = {IterationSpan{4, 13, 5 * ms, 14 * ms}, IterationSpan{13, 19, 14 * ms, 20 * ms}};
  const Phase f = Phase::kForward, b = Phase::kBackward, o = Phase::kOptimizer, x = Phase::kOther,
              out = Phase::kOutside;
  p.phase_of_event = {out, out, out, out, f, f, f, f, b, b, o, o, o, f, f, b, b, b, x, out, out};
  p.iteration_of_event = {-1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, -1, -1};
  return p;
}

struct Analyzed {
  std::unique_ptr<Analysis> analysis;
  std::unique_ptr<Symbolizer> symbolizer;
  std::unique_ptr<FrameResolver> resolver;
};

Analyzed analyze(const std::string& path) {
  Analyzed a;
  a.analysis = analyze_trace(path, false);
  a.symbolizer = std::make_unique<Symbolizer>(a.analysis->stacks.modules(), std::vector<std::string>{});
  a.resolver = std::make_unique<FrameResolver>(a.analysis->stacks, *a.symbolizer);
  return a;
}

MomentBreakdown breakdown_at(Analyzed& a, uint64_t event, const EventPhases& phases) {
  Moment moment{0, event};
  std::vector<MomentBreakdown> out = break_down_moments(*a.analysis, std::span(&moment, 1), phases, *a.resolver);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

void expect_row(const MomentBreakdown& b, BreakdownRow row, uint64_t mib, uint64_t count) {
  EXPECT_EQ(b.row(row).bytes, mib * kMiB) << breakdown_row_name(row);
  EXPECT_EQ(b.row(row).count, count) << breakdown_row_name(row);
}

TEST(PeakBreakdown, AtThePeakInBackwardEachCategoryHasItsBlocks) {
  Analyzed a = analyze(training_trace());
  ASSERT_EQ(a.analysis->model.devices().at(0).peak_allocated().event_index, 15u);
  MomentBreakdown b = breakdown_at(a, 15, training_phases());
  EXPECT_EQ(b.totals.allocated_bytes, 39 * kMiB);
  EXPECT_EQ(b.time_ns, 16 * ms);
  EXPECT_EQ(b.iteration, 1);
  EXPECT_EQ(b.phase, Phase::kBackward);
  expect_row(b, BreakdownRow::kParameters, 6, 1);       // P
  expect_row(b, BreakdownRow::kGradients, 8, 1);        // G
  expect_row(b, BreakdownRow::kOptimizerState, 16, 1);  // S, freed after the loop
  expect_row(b, BreakdownRow::kActivations, 8, 3);      // A2 (freed in backward at e16), K1, K2
  EXPECT_EQ(b.activations_kept.bytes, 4 * kMiB);        // K1, K2
  EXPECT_EQ(b.activations_kept.count, 2u);
  expect_row(b, BreakdownRow::kTemporaries, 1, 1);  // B2, freed in the same backward
  expect_row(b, BreakdownRow::kWorkspaces, 0, 0);
  expect_row(b, BreakdownRow::kUnclassified, 0, 0);
  EXPECT_EQ(b.cache_bytes, 25 * kMiB);  // 64 reserved - 39 allocated
  ASSERT_TRUE(b.outside_applies);
  EXPECT_EQ(b.outside[0].bytes, 4 * kMiB);  // cuBLAS: the cuMemAlloc in libcublas
  EXPECT_EQ(b.outside[0].count, 1u);
  EXPECT_EQ(b.outside[3].bytes, 2 * kMiB);  // other: the cudaMalloc of no stack; the segment is PyTorch's
  EXPECT_EQ(b.outside_bytes(), 6 * kMiB);
  ASSERT_TRUE(b.usage);  // none before the peak: the first after it (e20), driver 70 MiB of 200
  EXPECT_EQ(b.usage->time_ns, 21 * ms);
  EXPECT_EQ(b.usage->unattributed_bytes(), 130 * kMiB);
  EXPECT_EQ(peak_dominance(b), PeakDominance::kModelState);  // 30 of 39 MiB, 22 without G: still more than half
  EXPECT_EQ(uncertain_dominance(b), PeakDominance::kNone);
  EXPECT_TRUE(b.training_seen);
  // G's stack (13) is one frame in libtorch_cpu.so, whose file this machine does not have: not symbolized.
  EXPECT_EQ(b.unsymbolized[size_t(BreakdownRow::kGradients)].bytes, 8 * kMiB);
  EXPECT_EQ(b.unsymbolized_total().bytes, 8 * kMiB);
  EXPECT_EQ(b.unsymbolized_total().count, 1u);
}

// After e9 (A1 freed): P 6 parameters, K1 2 activation (kept), G 8 gradients = 16 MiB. Model state P + G = 14 of
// 16 MiB (87%), but G's native frame is not symbolized: without it 6 of 16 (37%). No verdict, an uncertain one.
TEST(PeakBreakdown, ADominanceThatDependsOnBlocksNotSymbolizedIsUncertain) {
  Analyzed a = analyze(training_trace());
  MomentBreakdown b = breakdown_at(a, 9, training_phases());
  EXPECT_EQ(b.totals.allocated_bytes, 16 * kMiB);
  expect_row(b, BreakdownRow::kGradients, 8, 1);
  EXPECT_EQ(b.unsymbolized_total().bytes, 8 * kMiB);
  EXPECT_EQ(peak_dominance(b), PeakDominance::kNone);
  EXPECT_EQ(uncertain_dominance(b), PeakDominance::kModelState);
  EXPECT_EQ(dominance_share_bytes(b, PeakDominance::kModelState, true), 14 * kMiB);
  EXPECT_EQ(dominance_share_bytes(b, PeakDominance::kModelState, false), 6 * kMiB);
  std::ostringstream out;
  print_breakdown_lines(out, b, "");
  const std::string text = out.str();
  EXPECT_NE(text.find("\n  DOMINANCE UNCERTAIN: parameters, gradients and optimizer state are 87% of allocated, but "
                      "8.00 MiB (8,388,608 B) of them have native frames not symbolized on this machine, library "
                      "workspaces perhaps (37% of allocated without them)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("PEAK DOMINATED"), std::string::npos) << text;
}

TEST(PeakBreakdown, AMomentInForward) {
  Analyzed a = analyze(training_trace());
  MomentBreakdown b = breakdown_at(a, 13, training_phases());
  EXPECT_EQ(b.totals.allocated_bytes, 36 * kMiB);
  EXPECT_EQ(b.iteration, 1);
  EXPECT_EQ(b.phase, Phase::kForward);
  expect_row(b, BreakdownRow::kParameters, 6, 1);
  expect_row(b, BreakdownRow::kGradients, 8, 1);
  expect_row(b, BreakdownRow::kOptimizerState, 16, 1);
  expect_row(b, BreakdownRow::kActivations, 6, 2);  // A2 (its backward frees it later), K1
  EXPECT_EQ(b.activations_kept.bytes, 2 * kMiB);
  expect_row(b, BreakdownRow::kTemporaries, 0, 0);
  EXPECT_EQ(b.cache_bytes, 28 * kMiB);
}

TEST(PeakBreakdown, AMomentLaterInBackwardAndAnOtherPhaseBlockKept) {
  Analyzed a = analyze(training_trace());
  MomentBreakdown b = breakdown_at(a, 16, training_phases());  // A2 just freed
  EXPECT_EQ(b.totals.allocated_bytes, 35 * kMiB);
  expect_row(b, BreakdownRow::kActivations, 4, 2);  // K1, K2: kept
  EXPECT_EQ(b.activations_kept.bytes, 4 * kMiB);
  expect_row(b, BreakdownRow::kTemporaries, 1, 1);  // B2
  b = breakdown_at(a, 18, training_phases());      // X, of an "other" phase, kept past its iteration
  EXPECT_EQ(b.phase, Phase::kOther);
  expect_row(b, BreakdownRow::kUnclassified, 1, 1);
  expect_row(b, BreakdownRow::kTemporaries, 0, 0);
}

TEST(PeakBreakdown, WithoutPhasesEverythingIsUnclassified) {
  Analyzed a = analyze(training_trace());
  MomentBreakdown b = breakdown_at(a, 15, EventPhases{});
  expect_row(b, BreakdownRow::kUnclassified, 39, 7);
  for (BreakdownRow row : {BreakdownRow::kParameters, BreakdownRow::kGradients, BreakdownRow::kOptimizerState,
                           BreakdownRow::kActivations, BreakdownRow::kTemporaries})
    expect_row(b, row, 0, 0);
  EXPECT_FALSE(b.iteration);
  EXPECT_EQ(b.cache_bytes, 25 * kMiB);  // the rows beside allocated need no phases
  EXPECT_EQ(b.outside_bytes(), 6 * kMiB);
  EXPECT_EQ(peak_dominance(b), PeakDominance::kNone);
}

TEST(PeakBreakdown, SummarysOnePassGivesTheSameRowsAsTheReplay) {
  std::string path = training_trace();
  Analyzed a;
  a.analysis = analyze_trace(path, /*with_live_at_peak=*/true);
  a.symbolizer = std::make_unique<Symbolizer>(a.analysis->stacks.modules(), std::vector<std::string>{});
  a.resolver = std::make_unique<FrameResolver>(a.analysis->stacks, *a.symbolizer);
  MomentBreakdown b = break_down_captured_peak(*a.analysis, 0, *a.resolver);
  EXPECT_EQ(b.event_index, 15u);
  EXPECT_EQ(b.totals.allocated_bytes, 39 * kMiB);
  EXPECT_EQ(b.totals.reserved_bytes, 64 * kMiB);
  expect_row(b, BreakdownRow::kUnclassified, 39, 7);
  EXPECT_EQ(b.cache_bytes, 25 * kMiB);
  EXPECT_EQ(b.outside[0].bytes, 4 * kMiB);  // cuBLAS
  EXPECT_EQ(b.outside[3].bytes, 2 * kMiB);  // other
  EXPECT_EQ(b.outside_bytes(), 6 * kMiB);   // not the 64 MiB segment
  ASSERT_TRUE(b.usage);                     // the device's peak_usage: the one sample
  EXPECT_EQ(b.usage->unattributed_bytes(), 130 * kMiB);
}

TEST(PeakBreakdown, PlacementRules) {
  EventPhases p = training_phases();
  // Set-up allocations: parameters only when live to the end of the last iteration (event 19).
  EXPECT_EQ(place_allocation(3, std::nullopt, p).row, BreakdownRow::kParameters);
  EXPECT_EQ(place_allocation(3, 19, p).row, BreakdownRow::kParameters);
  EXPECT_EQ(place_allocation(3, 18, p).row, BreakdownRow::kUnclassified);
  EXPECT_EQ(place_allocation(19, std::nullopt, p).row, BreakdownRow::kUnclassified);  // after the loop
  // Forward: freed in backward, freed in forward, kept.
  EXPECT_EQ(place_allocation(4, 9, p).row, BreakdownRow::kActivations);
  EXPECT_FALSE(place_allocation(4, 9, p).kept_across_iterations);
  EXPECT_EQ(place_allocation(4, 6, p).row, BreakdownRow::kTemporaries);
  EXPECT_EQ(place_allocation(4, 11, p).row, BreakdownRow::kTemporaries);  // freed in the optimizer step
  EXPECT_TRUE(place_allocation(4, 13, p).kept_across_iterations);         // freed in the next iteration
  EXPECT_EQ(place_allocation(4, 13, p).row, BreakdownRow::kActivations);
  // Backward and optimizer: kept past the iteration, or not.
  EXPECT_EQ(place_allocation(8, 15, p).row, BreakdownRow::kGradients);
  EXPECT_EQ(place_allocation(8, 12, p).row, BreakdownRow::kTemporaries);
  EXPECT_EQ(place_allocation(10, std::nullopt, p).row, BreakdownRow::kOptimizerState);
  EXPECT_EQ(place_allocation(10, 12, p).row, BreakdownRow::kTemporaries);
  // Past the phases' events, or without phases.
  EXPECT_EQ(place_allocation(21, std::nullopt, p).row, BreakdownRow::kUnclassified);
  EXPECT_EQ(place_allocation(8, std::nullopt, EventPhases{}).row, BreakdownRow::kUnclassified);
}

TEST(PeakBreakdown, LibraryWorkspaceFromTheStack) {
  auto stack_of = [](std::vector<std::string> functions) {
    ResolvedStack s;
    for (std::string& f : functions) s.frames.push_back(Frame{.function = std::move(f), .module = "libtorch_cuda.so"});
    return s;
  };
  EXPECT_TRUE(is_library_workspace(stack_of({"c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::"
                                             "allocate(unsigned long)",
                                             "at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)"})));
  EXPECT_TRUE(is_library_workspace(stack_of({"at::cuda::getCUDABlasLtWorkspace()"})));
  EXPECT_FALSE(is_library_workspace(stack_of({"at::native::empty_cuda(c10::ArrayRef<long>, WorkspaceKind)"})));
  EXPECT_FALSE(is_library_workspace(stack_of({"my::Workspace::grow()"})));
  EXPECT_FALSE(is_library_workspace(ResolvedStack{}));
}

TEST(PeakBreakdown, NativeFramesNotSymbolized) {
  auto stack_of = [](Frame f) { return ResolvedStack{.frames = {Frame{.function = "at::native::add()", .module = "a.so"}, f}}; };
  // FrameResolver's names: module + offset where the symbolizer found no function.
  EXPECT_TRUE(pytorch_frames_unsymbolized(
      stack_of(Frame{.function = "libtorch_cuda.so+0x3a4b238", .module = "libtorch_cuda.so", .module_offset = 0x3a4b238})));
  EXPECT_TRUE(pytorch_frames_unsymbolized(stack_of(Frame{.function = "libtorch_cuda.so+0x10 (build id mismatch)",
                                                           .module = "libtorch_cuda.so",
                                                           .module_offset = 0x10,
                                                           .build_id_mismatch = true})));
  EXPECT_FALSE(pytorch_frames_unsymbolized(stack_of(Frame{.function = "at::cuda::getCUDABlasLtWorkspace()",
                                                            .module = "libtorch_cuda.so", .module_offset = 0x10})));
  // The machine has PyTorch's libraries where it names one of their frames: an internal function without a symbol
  // beside it does not hide a workspace (the workspace functions are exported).
  ResolvedStack partly{.frames = {Frame{.function = "libtorch_cuda.so+0x20", .module = "libtorch_cuda.so",
                                        .module_offset = 0x20},
                                  Frame{.function = "at::native::gelu_out()", .module = "libtorch_cuda.so",
                                        .module_offset = 0x40}}};
  EXPECT_FALSE(pytorch_frames_unsymbolized(partly));
  // Frames of other libraries, named or not, are not what the workspace rule reads.
  EXPECT_FALSE(pytorch_frames_unsymbolized(
      stack_of(Frame{.function = "libcuda.so.1+0x500", .module = "libcuda.so.1", .module_offset = 0x500})));
  // Outside every module (no machine names it), the interpreter's own frames, Python frames: not counted.
  EXPECT_FALSE(pytorch_frames_unsymbolized(stack_of(Frame{.function = "0x7f0010"})));
  EXPECT_FALSE(pytorch_frames_unsymbolized(stack_of(
      Frame{.function = "python3.12+0x100", .module = "python3.12", .module_offset = 0x100, .in_python_interpreter = true})));
  EXPECT_FALSE(pytorch_frames_unsymbolized(stack_of(Frame{.function = "f", .file = "a.py", .line = 1, .python = true})));
}

// A dominance verdict counts only what it is sure of: a row's blocks not symbolized may be library workspaces.
TEST(PeakBreakdown, DominanceWithoutTheBlocksNotSymbolized) {
  MomentBreakdown b;
  b.phases_source = IterationSource::kPythonLoop;
  b.totals.allocated_bytes = 100;
  b.rows[size_t(BreakdownRow::kActivations)].bytes = 60;
  b.unsymbolized[size_t(BreakdownRow::kActivations)].bytes = 9;  // 51 sure: still more than half
  EXPECT_EQ(peak_dominance(b), PeakDominance::kActivations);
  EXPECT_EQ(uncertain_dominance(b), PeakDominance::kNone);
  b.unsymbolized[size_t(BreakdownRow::kActivations)].bytes = 10;  // 50 sure: not more than half
  EXPECT_EQ(peak_dominance(b), PeakDominance::kNone);
  EXPECT_EQ(uncertain_dominance(b), PeakDominance::kActivations);
  b.rows[size_t(BreakdownRow::kActivations)].bytes = 50;  // not even counting them
  EXPECT_EQ(uncertain_dominance(b), PeakDominance::kNone);
}

// Without a backward the advice is for inference, and points at what keeps the activations where most are kept.
TEST(PeakBreakdown, InferenceLoopAdvice) {
  MomentBreakdown b;
  b.phases_source = IterationSource::kPythonLoop;
  b.iteration = 2;
  b.phase = Phase::kForward;
  b.totals.allocated_bytes = 10 * kMiB;
  b.rows[size_t(BreakdownRow::kParameters)] = {2 * kMiB, 1};
  b.rows[size_t(BreakdownRow::kActivations)] = {8 * kMiB, 4};
  b.activations_kept = {5 * kMiB, 3};  // more than half of 8
  std::ostringstream out;
  print_breakdown_lines(out, b, "");
  EXPECT_EQ(out.str(),
            "breakdown (iterations from the Python loop, in iteration 3 (forward)):\n"
            "  allocated 10.00 MiB (10,485,760 B): parameters 2.00 MiB (2,097,152 B), activations 8.00 MiB "
            "(8,388,608 B) (kept across iterations 5.00 MiB (5,242,880 B))\n"
            "  PEAK DOMINATED BY ACTIVATIONS: 80% of allocated. The loop has no backward (inference): to lower it, "
            "smaller batches, lower precision (bf16/fp16). Most of them (5.00 MiB (5,242,880 B)) are kept across "
            "iterations, which no backward frees: the loop holds outputs with their autograd graph (the kept-graph "
            "trap says how to drop it: torch.inference_mode()).\n");
  b.activations_kept = {4 * kMiB, 2};  // half: not most
  out.str("");
  print_breakdown_lines(out, b, "");
  EXPECT_EQ(out.str().substr(out.str().find("  PEAK")),
            "  PEAK DOMINATED BY ACTIVATIONS: 80% of allocated. The loop has no backward (inference): to lower it, "
            "smaller batches, lower precision (bf16/fp16).\n");
  b.training_seen = true;
  out.str("");
  print_breakdown_lines(out, b, "");
  EXPECT_EQ(out.str().substr(out.str().find("  PEAK")),
            "  PEAK DOMINATED BY ACTIVATIONS: 80% of allocated. To lower it: smaller micro-batches with gradient "
            "accumulation, mixed precision (autocast to bf16/fp16), activation checkpointing "
            "(torch.utils.checkpoint).\n");
  b.rows[size_t(BreakdownRow::kParameters)] = {8 * kMiB, 1};
  b.rows[size_t(BreakdownRow::kActivations)] = {2 * kMiB, 1};
  b.activations_kept = {};
  b.training_seen = false;
  out.str("");
  print_breakdown_lines(out, b, "");
  EXPECT_EQ(out.str().substr(out.str().find("  PEAK")),
            "  PEAK DOMINATED BY PARAMETERS, GRADIENTS AND OPTIMIZER STATE: 80% of allocated. Smaller batches will "
            "not lower it much: load the weights in lower precision (bf16/fp16), or split the model across GPUs.\n");
}

TEST(PeakBreakdown, DominanceNeedsMoreThanHalf) {
  MomentBreakdown b;
  b.phases_source = IterationSource::kPythonLoop;
  b.totals.allocated_bytes = 100;
  b.rows[size_t(BreakdownRow::kActivations)].bytes = 50;
  EXPECT_EQ(peak_dominance(b), PeakDominance::kNone);  // exactly half
  b.rows[size_t(BreakdownRow::kActivations)].bytes = 51;
  EXPECT_EQ(peak_dominance(b), PeakDominance::kActivations);
  b.rows[size_t(BreakdownRow::kActivations)].bytes = 10;
  b.rows[size_t(BreakdownRow::kParameters)].bytes = 20;
  b.rows[size_t(BreakdownRow::kGradients)].bytes = 20;
  b.rows[size_t(BreakdownRow::kOptimizerState)].bytes = 11;
  EXPECT_EQ(peak_dominance(b), PeakDominance::kModelState);
  b.phases_source = IterationSource::kNone;
  EXPECT_EQ(peak_dominance(b), PeakDominance::kNone);
}

TEST(PeakBreakdown, TreeByUserLine) {
  Analyzed a = analyze(training_trace());
  MomentBreakdown b = breakdown_at(a, 15, training_phases());
  SiteGrouping grouping(a.analysis->stacks);
  std::vector<UserLineNode> tree = live_tree(b.live, *a.resolver, grouping);
  ASSERT_EQ(tree.size(), 4u);
  // train.py:45 (S, under adam.py) 16 MiB; train.py:42 (A2, K1, K2 under linear.py; B2 directly) 9 MiB; no user
  // frame (G) 8 MiB; train.py:50 (P) 6 MiB.
  ASSERT_TRUE(tree[0].user_frame);
  EXPECT_EQ(tree[0].user_frame->line, 45u);
  EXPECT_EQ(tree[0].bytes, 16 * kMiB);
  ASSERT_TRUE(tree[1].user_frame);
  EXPECT_EQ(tree[1].user_frame->line, 42u);
  EXPECT_EQ(tree[1].bytes, 9 * kMiB);
  EXPECT_EQ(tree[1].count, 4u);
  ASSERT_EQ(tree[1].sites.size(), 2u);
  EXPECT_EQ(tree[1].sites[0].stack_id, 12u);
  EXPECT_EQ(tree[1].sites[0].bytes, 8 * kMiB);
  EXPECT_EQ(tree[1].sites[0].count, 3u);
  EXPECT_EQ(tree[1].sites[1].stack_id, 10u);
  EXPECT_EQ(tree[1].sites[1].bytes, kMiB);
  EXPECT_FALSE(tree[2].user_frame);
  EXPECT_EQ(tree[2].bytes, 8 * kMiB);
  ASSERT_TRUE(tree[3].user_frame);
  EXPECT_EQ(tree[3].user_frame->line, 50u);
  EXPECT_EQ(tree[3].bytes, 6 * kMiB);
}

TEST(PeakBreakdown, SummaryLinesWithPhases) {
  Analyzed a = analyze(training_trace());
  std::ostringstream out;
  print_breakdown_lines(out, breakdown_at(a, 15, training_phases()), "  ");
  EXPECT_EQ(out.str(),
            "  breakdown (iterations from the Python loop, in iteration 2 (backward)):\n"
            "    allocated 39.00 MiB (40,894,464 B): parameters 6.00 MiB (6,291,456 B), gradients 8.00 MiB (8,388,608 "
            "B), optimizer state 16.00 MiB (16,777,216 B), activations 8.00 MiB (8,388,608 B) (kept across "
            "iterations 4.00 MiB (4,194,304 B)), temporaries 1.00 MiB (1,048,576 B)\n"
            // G (stack 13: a frame in libtorch_cpu.so, whose file is not on this machine).
            "    of these, 8.00 MiB (8,388,608 B) in 1 allocation have native frames not symbolized on this machine: "
            "library workspaces among them cannot be told apart (analyze where the trace was recorded, or give "
            "--debug-paths)\n"
            "    PyTorch's cache (reserved - allocated) 25.00 MiB (26,214,400 B)\n"
            "    outside PyTorch's allocator 6.00 MiB (6,291,456 B): cuBLAS workspace 4.00 MiB (4,194,304 B) in 1 "
            "allocation, other (the program, other libraries) 2.00 MiB (2,097,152 B) in 1 allocation\n"
            "    CUDA context and unattributed 130.00 MiB (136,314,880 B) (device usage sampled at 0.021 s)\n"
            "    PEAK DOMINATED BY PARAMETERS, GRADIENTS AND OPTIMIZER STATE: 76% of allocated (56% without the blocks "
            "not symbolized). Smaller batches will not lower it much: shard them across GPUs (FSDP, DeepSpeed ZeRO), "
            "or keep a smaller optimizer state.\n");
}

// `memtrace peak ARGS`: its exit status and what it wrote to each stream.
test::MemtraceRun run_peak(const std::string& args) { return test::run_memtrace_binary("peak " + args); }

// The command finds the iterations itself (find_iterations), not training_phases(): train_step's line 42 comes
// back after line 45, so iterations start at e4 and e13 (line 45, seen in one run, is not where one starts); e10
// and e11 are under torch/optim (optimizer); G (e8) has no Python frames and unsymbolized native ones, so it takes
// the phase in effect, forward, and, never freed, is an activation kept across iterations with K1 and K2; A2 and
// B2 are freed by frees without a stack, in the phase in effect (forward): temporaries. At the peak (e15): P 6
// parameters, S 16 optimizer state, G 8 + K1 2 + K2 2 kept activations, A2 4 + B2 1 temporaries = 39 MiB, of which
// P + S = 22 MiB (56%) is model state.
TEST(PeakCli, TextReportAtThePeak) {
  std::string path = training_trace();
  test::MemtraceRun r = run_peak(path + " --top 4");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const std::string expected =
      "\nDevice 0: live at peak allocated, 0.016000 s (event 15)\n"
      "  allocated 39.00 MiB (40,894,464 B), reserved 64.00 MiB (67,108,864 B), driver 70.00 MiB (73,400,320 B)\n"
      "  Breakdown (iterations from the Python loop, in iteration 2 (forward))\n"
      "    parameters          6.00 MiB (6,291,456 B) in 1 allocation\n"
      "    gradients           0 B in 0 allocations\n"
      "    optimizer state     16.00 MiB (16,777,216 B) in 1 allocation\n"
      "    activations         12.00 MiB (12,582,912 B) in 3 allocations\n"
      "      of them kept across iterations 12.00 MiB (12,582,912 B) in 3 allocations\n"
      "    temporaries         5.00 MiB (5,242,880 B) in 2 allocations\n"
      "    library workspaces  0 B in 0 allocations\n"
      "    unclassified        0 B in 0 allocations\n"
      "    of these, 8.00 MiB (8,388,608 B) in 1 allocation have native frames not symbolized on this machine: "
      "library workspaces among them cannot be told apart (analyze where the trace was recorded, or give "
      "--debug-paths)\n"
      "  Beside the allocated total\n"
      "    PyTorch's cache (reserved - allocated) 25.00 MiB (26,214,400 B)\n"
      "    outside PyTorch's allocator 6.00 MiB (6,291,456 B): cuBLAS workspace 4.00 MiB (4,194,304 B) in 1 "
      "allocation, other (the program, other libraries) 2.00 MiB (2,097,152 B) in 1 allocation\n"
      "    CUDA context and unattributed 130.00 MiB (136,314,880 B) (device usage sampled at 0.021 s)\n"
      "  PEAK DOMINATED BY PARAMETERS, GRADIENTS AND OPTIMIZER STATE: 56% of allocated. Smaller batches will not "
      "lower it much: shard them across GPUs (FSDP, DeepSpeed ZeRO), or keep a smaller optimizer state.\n"
      "  Live by user line: 4 lines\n"
      "    #1 16.00 MiB (16,777,216 B) in 1 allocation: train.py:45 train_step\n"
      "      #1.1 16.00 MiB (16,777,216 B) in 1 allocation: torch/optim/adam.py:178 Adam._init_group\n"
      "    #2 9.00 MiB (9,437,184 B) in 4 allocations: train.py:42 train_step\n"
      "      #2.1 8.00 MiB (8,388,608 B) in 3 allocations: torch/nn/linear.py:134 Linear.forward\n"
      "      #2.2 1.00 MiB (1,048,576 B) in 1 allocation: train.py:42 train_step\n"
      "    #3 8.00 MiB (8,388,608 B) in 1 allocation: (no frame of the program's own Python code)\n"
      "      #3.1 8.00 MiB (8,388,608 B) in 1 allocation: libtorch_cpu.so+0x100\n"
      // P's only site is train.py:50 itself: no site line repeats it.
      "    #4 6.00 MiB (6,291,456 B) in 1 allocation: train.py:50 <module>\n";
  const size_t device = r.out.find("\nDevice 0");
  ASSERT_NE(device, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(device), expected);
}

TEST(PeakCli, AtATimeAndJson) {
  std::string path = training_trace();
  test::MemtraceRun r = run_peak(path + " --at 0.0145 --json");  // e13 is at 14 ms, e14 at 15 ms
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["peaks"].size(), 1u);
  const nlohmann::json& p = j["peaks"][0];
  EXPECT_EQ(p["device"], 0);
  EXPECT_EQ(p["moment"], "time");
  EXPECT_EQ(p["event"], 13);
  EXPECT_EQ(p["allocated_bytes"], 36 * kMiB);
  const nlohmann::json& b = p["breakdown"];
  // The phases find_iterations gives (PeakCli.TextReportAtThePeak): at e13, P 6 parameters, S 16 optimizer
  // state, K1 2 + G 8 kept activations, A2 4 temporary; P + S = 22 of 36 MiB (61%).
  EXPECT_EQ(b["phases_source"], "python_loop");
  EXPECT_EQ(b["iteration"], 2);
  EXPECT_EQ(b["rows"]["unclassified"]["bytes"], 0);
  EXPECT_EQ(b["rows"]["parameters"]["bytes"], 6 * kMiB);
  EXPECT_EQ(b["rows"]["optimizer_state"]["bytes"], 16 * kMiB);
  EXPECT_EQ(b["rows"]["activations"]["bytes"], 10 * kMiB);
  EXPECT_EQ(b["rows"]["activations"]["count"], 2);
  EXPECT_EQ(b["rows"]["temporaries"]["bytes"], 4 * kMiB);
  EXPECT_EQ(b["cache_bytes"], 28 * kMiB);
  EXPECT_EQ(b["outside_allocator"]["bytes"], 6 * kMiB);
  EXPECT_EQ(b["outside_allocator"]["cublas"]["bytes"], 4 * kMiB);
  EXPECT_EQ(b["outside_allocator"]["other"]["count"], 1);
  EXPECT_EQ(b["context_and_unattributed_bytes"], 130 * kMiB);
  EXPECT_EQ(b["dominated_by"], "parameters_gradients_optimizer_state");
  EXPECT_EQ(b["dominance_uncertain"], nullptr);
  EXPECT_EQ(b["unsymbolized_native_frames"]["bytes"], 8 * kMiB);  // G
  EXPECT_EQ(b["unsymbolized_native_frames"]["count"], 1);
  // At 14.5 ms: S 16 (train.py:45), G 8 (no user frame), P 6 (train.py:50), A2 + K1 6 (train.py:42): of the two
  // lines of 6 MiB, the one whose largest call site has the lower stack id (11) first, as group_by_call_site.
  const nlohmann::json& lines = p["user_lines"];
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["user_frame"]["line"], 45);
  EXPECT_EQ(lines[0]["bytes"], 16 * kMiB);
  EXPECT_EQ(lines[1]["user_frame"], nullptr);
  EXPECT_EQ(lines[1]["bytes"], 8 * kMiB);
  EXPECT_EQ(lines[2]["user_frame"]["line"], 50);
  EXPECT_EQ(lines[2]["bytes"], 6 * kMiB);
  EXPECT_EQ(lines[2]["count"], 1);
  EXPECT_EQ(lines[3]["user_frame"]["line"], 42);
  EXPECT_EQ(lines[3]["user_frame"]["file"], "train.py");
  EXPECT_EQ(lines[3]["user_frame"]["function"], "train_step");
  EXPECT_EQ(lines[3]["bytes"], 6 * kMiB);
  EXPECT_EQ(lines[3]["count"], 2);
  ASSERT_EQ(lines[3]["sites"].size(), 1u);
  EXPECT_EQ(lines[3]["sites"][0]["bytes"], 6 * kMiB);
  EXPECT_EQ(lines[3]["sites"][0]["frames"][0]["function"], "Linear.forward");
}

// --at takes the last event at or before TIME: the time the header prints gives back its event; the trace's end
// (21 ms, its last event) is inside it.
TEST(PeakCli, AtTheTimeTheHeaderPrints) {
  std::string path = training_trace();
  test::MemtraceRun r = run_peak(path + " --at 0.016000 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["peaks"][0]["event"], 15);
  r = run_peak(path + " --at 0.0159999 --json");  // just before e15 (16 ms): e14
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["peaks"][0]["event"], 14);
  r = run_peak(path + " --at 0.021 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["peaks"][0]["event"], 20);
}

TEST(PeakCli, BadAtIsOneLine) {
  std::string path = training_trace();
  test::MemtraceRun r = run_peak(path + " --at 0.5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": --at 0.5: outside the trace, which runs from 0.000 s to 0.021 s\n");
  EXPECT_EQ(r.out, "");
  r = run_peak(path + " --at -1");
  EXPECT_EQ(r.exit_code, 2);
  r = run_peak(path + " --at 0.0005");  // the first event is at 1 ms
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": --at 0.0005: before the trace's first event, at 0.001000 s\n");
  r = run_peak(path + " --at soon");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "memtrace: --at needs a time in seconds from trace start (as the summary prints them), not 'soon'");
  r = run_peak(path + " --device 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: " + path + ": --device 3: the trace has no events of that device\n");
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// A device without a block layer: allocated is its driver total, which holds what its stream-ordered pools reserve
// (POOL_RESERVED samples) beside its allocations. The breakdown's rows add up to allocated: the reserve no live
// allocation accounts for is unclassified. MiB: e0 cudaMalloc 2 (allocated 2), e1 pool sample 8 (allocated 10: the
// peak). Rows: unclassified 10 MiB, 1 allocation; workspaces 0.
TEST(PeakBreakdown, APoolsReserveOnADeviceWithoutBlocksIsUnclassified) {
  constexpr int64_t ms = 1'000'000;
  test::TraceBuilder b;
  b.start();
  b.event(test::driver_alloc(0, 0x100000, 2 * test::kMiB, ms));
  b.event(test::make_event(proto::POOL_RESERVED, proto::LAYER_UNKNOWN, proto::CUDA_MALLOC_ASYNC, 0, 0xA1,
                           8 * test::kMiB, ms))
      .end_chunk();
  std::string path = test::temp_path("peak-breakdown-pool-reserve.mtrace");
  test::write_file(path, b.bytes());
  std::unique_ptr<Analysis> a = analyze_trace(path, true);
  Symbolizer symbolizer(a->stacks.modules(), std::vector<std::string>{});
  FrameResolver resolver(a->stacks, symbolizer);
  ASSERT_EQ(a->model.devices().at(0).peak_allocated().bytes, 10 * test::kMiB);
  // Without phases (from the first pass) and with a replay (break_down_moments), the same rows.
  MomentBreakdown captured = breakdowns_at_peaks(*a, EventPhases{}, resolver).at(0);
  Moment moment{0, 1};
  MomentBreakdown replayed = break_down_moments(*a, std::span(&moment, 1), EventPhases{}, resolver).at(0);
  for (const MomentBreakdown* m : {&captured, &replayed}) {
    EXPECT_EQ(m->totals.allocated_bytes, 10 * test::kMiB);
    EXPECT_EQ(m->row(BreakdownRow::kUnclassified).bytes, 10 * test::kMiB);
    EXPECT_EQ(m->row(BreakdownRow::kUnclassified).count, 1u);
    EXPECT_EQ(m->row(BreakdownRow::kWorkspaces).bytes, 0u);
  }
}

}  // namespace
}  // namespace memtrace
