// site_lines.h: how a call site's stack reads in the text reports. Stacks built by hand with real frame names
// (from the PyTorch 2.11 traces of tests/gpu/iteration_jobs.py), printed, and compared line by line with the text
// worked out from the rules in site_lines.h.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "report/text/site_lines.h"

namespace memtrace {
namespace {

constexpr const char* kAllocFoundBlock =
    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_found_block(c10::cuda::"
    "CUDACachingAllocator::Native::(anonymous namespace)::AllocParams const&, unsigned long, "
    "std::shared_ptr<c10::GatheredContext>, bool)";
constexpr const char* kAddmmRedispatch =
    "at::_ops::addmm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, at::Tensor const&, "
    "c10::Scalar const&, c10::Scalar const&)";
constexpr const char* kAddmmCall =
    "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar "
    "const&)";
constexpr const char* kSitePackages = "/opt/torch/.venv/lib/python3.12/site-packages/";
constexpr const char* kJob = "/work/main/tests/gpu/iteration_jobs.py";

Frame native(std::string function, std::string module, uint64_t offset = 0) {
  Frame f;
  f.function = std::move(function);
  f.module = std::move(module);
  f.module_offset = offset;
  return f;
}

Frame python(std::string file, std::string function, uint32_t line) {
  Frame f;
  f.python = true;
  f.file = std::move(file);
  f.function = std::move(function);
  f.line = line;
  return f;
}

Frame library(const std::string& path, std::string function, uint32_t line) {
  return python(kSitePackages + path, std::move(function), line);
}

std::string printed(const ResolvedStack& stack, const TextOptions& options = {}) {
  std::ostringstream out;
  print_call_site_stack(out, stack, options);
  return out.str();
}

TextOptions depths() {
  TextOptions options;
  options.max_native_frames = 32;
  options.max_native_frames_python = 16;
  return options;
}

// hf_eval's site #1, its native frames shortened to four: a run of 4 library frames folds, the user's frames are
// marked, the native frames are one line.
ResolvedStack hf_eval_site() {
  ResolvedStack stack;
  stack.frames = {
      native(kAllocFoundBlock, "libc10_cuda.so", 0x43e11),
      native(kAddmmRedispatch, "libtorch_cpu.so", 0x2742e03),
      native("torch::autograd::VariableType::(anonymous namespace)::addmm(c10::DispatchKeySet, at::Tensor const&, "
             "at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)",
             "libtorch_cpu.so", 0x528eee6),
      native(kAddmmCall, "libtorch_cpu.so", 0x27f4155),
      library("transformers/pytorch_utils.py", "Conv1D.forward", 119),
      library("torch/nn/modules/module.py", "Module._call_impl", 1790),
      library("torch/nn/modules/module.py", "Module._wrapped_call_impl", 1779),
      library("transformers/models/gpt2/modeling_gpt2.py", "GPT2MLP.forward", 239),
      python(kJob, "hf_eval", 148),
      python(kJob, "main", 165),
      python(kJob, "<module>", 177),
  };
  stack.cuts.native_frames_cut = true;
  return stack;
}

TEST(SiteLines, PythonFramesFirstUserMarkedNativeOneLine) {
  EXPECT_EQ(printed(hf_eval_site(), depths()),
            "      transformers/pytorch_utils.py:119 Conv1D.forward\n"
            "      ... 3 more library frames: torch, transformers\n"
            "    > /work/main/tests/gpu/iteration_jobs.py:148 hf_eval\n"
            "    > /work/main/tests/gpu/iteration_jobs.py:165 main\n"
            "    > /work/main/tests/gpu/iteration_jobs.py:177 <module>\n"
            "      native: aten::addmm -> PyTorch allocator (4 frames, cut at MEMTRACE_MAX_FRAMES_PYTHON=16; "
            "--all-frames shows them)\n");
}

TEST(SiteLines, AllFramesListsEveryFrameInFull) {
  TextOptions options = depths();
  options.all_frames = true;
  const std::string text = printed(hf_eval_site(), options);
  EXPECT_EQ(text.substr(0, text.find('\n') + 1),
            std::string("      ") + kAllocFoundBlock + " (libc10_cuda.so+0x43e11)\n");
  EXPECT_NE(text.find("      ... native frames stop here: the tracer's limit on threads with Python frames, 16 "
                      "(MEMTRACE_MAX_FRAMES_PYTHON)\n"
                      "      /opt/torch/.venv/lib/python3.12/site-packages/transformers/pytorch_utils.py:119 "
                      "Conv1D.forward\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("> "), std::string::npos) << text;
  EXPECT_EQ(text.find("native:"), std::string::npos) << text;
}

TEST(SiteLines, ShortLibraryRunsShownWholeStandardLibraryFoldedPythonCutSaid) {
  // ctypes calling cudaMalloc (tests/e2e/python/leak.py), started through runpy; the outermost Python frames cut.
  ResolvedStack stack;
  stack.frames = {
      native("libffi.so.8+0x9f6a", "libffi.so.8", 0x9f6a),
      native("ffi_call", "libffi.so.8", 0x6b0d),
      python("/work/main/tests/e2e/leak.py", "DeviceBuffer.__init__", 21),
      library("torch/nn/modules/module.py", "Module._call_impl", 1790),
      library("torch/nn/modules/module.py", "Module._wrapped_call_impl", 1779),
      python("/work/main/tests/e2e/leak.py", "<module>", 40),
      python("/usr/lib/python3.12/runpy.py", "_run_code", 88),
      python("/usr/lib/python3.12/runpy.py", "_run_module_as_main", 198),
      python("<frozen runpy>", "_run_module_as_main", 201),
  };
  stack.cuts.python_frames_cut = true;
  EXPECT_EQ(
      printed(stack, depths()),
      "    > /work/main/tests/e2e/leak.py:21 DeviceBuffer.__init__\n"
      "      torch/nn/modules/module.py:1790 Module._call_impl\n"
      "      torch/nn/modules/module.py:1779 Module._wrapped_call_impl\n"
      "    > /work/main/tests/e2e/leak.py:40 <module>\n"
      "      runpy.py:88 _run_code\n"
      "      ... 2 more library frames: the standard library\n"
      "      ... outer Python frames past the 7th not recorded\n"
      "      native: CUDA driver/runtime (2 frames, 1 not symbolized on this machine; --all-frames shows them)\n");
}

TEST(SiteLines, BorrowedBackwardStackSaysSoAndNamesTheNode) {
  // An allocation on the autograd thread (train's site #2, shortened) given the Python stack of the thread in
  // loss.backward(). Its native frames were cut at the plain limit: the autograd thread has no Python frames.
  ResolvedStack stack;
  stack.frames = {
      native(kAllocFoundBlock, "libc10_cuda.so", 0x43e11),
      native("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "libtorch_cpu.so", 0x2d26241),
      native("torch::autograd::generated::details::mm_mat1_backward(at::Tensor const&, at::Tensor const&, "
             "c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::Layout, c10::Scalar const&)",
             "libtorch_cpu.so", 0x4f2a5b3),
      native("torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> "
             ">&&)",
             "libtorch_cpu.so", 0x4fc547f),
      native("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
             "libtorch_cpu.so", 0x5e52eeb),
      library("torch/autograd/graph.py", "_engine_run_backward", 829),
      library("torch/autograd/__init__.py", "backward", 354),
      library("torch/_tensor.py", "Tensor.backward", 648),
      python(kJob, "train", 75),
  };
  stack.cuts.native_frames_cut = true;
  stack.python_frames_from_backward = true;
  EXPECT_EQ(printed(stack, depths()),
            "      (on the autograd thread; Python stack of the thread waiting in backward())\n"
            "      torch/autograd/graph.py:829 _engine_run_backward\n"
            "      ... 2 more library frames: torch\n"
            "    > /work/main/tests/gpu/iteration_jobs.py:75 train\n"
            "      native: autograd node AddmmBackward0, aten::mm -> PyTorch allocator (5 frames, cut at "
            "MEMTRACE_MAX_FRAMES=32; --all-frames shows them)\n");
  TextOptions options = depths();
  options.all_frames = true;
  const std::string all = printed(stack, options);
  EXPECT_EQ(all.substr(0, all.find('\n') + 1),
            "      (on the autograd thread; Python stack of the thread waiting in backward())\n");
  EXPECT_NE(all.find("torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor, "
                     "std::allocator<at::Tensor> >&&) (libtorch_cpu.so+0x4fc547f)\n"),
            std::string::npos)
      << all;
}

TEST(SiteLines, CppProgramKeepsItsNativeFramesShortened) {
  ResolvedStack stack;
  Frame descend = native("(anonymous namespace)::descend_and_allocate(int)", "libe2e_deep_alloc.so", 0x23fa);
  descend.file = "../tests/e2e/deep_alloc.cc";
  descend.line = 20;
  Frame run = native("run_oom_sequence(Allocator const&)", "e2e_torch_allocator", 0x1322);
  run.file = "../tests/e2e/torch_allocator.cc";
  run.line = 50;
  Frame gone = native("libgone.so+0x30 (build id mismatch)", "libgone.so", 0x30);
  gone.file = "/nonexistent/libgone.so";
  stack.frames = {descend, run, gone};
  EXPECT_EQ(printed(stack),
            "      (anonymous namespace)::descend_and_allocate() (libe2e_deep_alloc.so+0x23fa) "
            "../tests/e2e/deep_alloc.cc:20\n"
            "      run_oom_sequence() (e2e_torch_allocator+0x1322) ../tests/e2e/torch_allocator.cc:50\n"
            "      libgone.so+0x30 (build id mismatch) /nonexistent/libgone.so\n");
  TextOptions options;
  options.all_frames = true;
  EXPECT_EQ(printed(stack, options),
            "      (anonymous namespace)::descend_and_allocate(int) (libe2e_deep_alloc.so+0x23fa) "
            "../tests/e2e/deep_alloc.cc:20\n"
            "      run_oom_sequence(Allocator const&) (e2e_torch_allocator+0x1322) ../tests/e2e/torch_allocator.cc:50\n"
            "      libgone.so+0x30 (build id mismatch) /nonexistent/libgone.so\n");
}

TEST(SiteLines, NoNativeFramesKeptAndNoStack) {
  ResolvedStack stack;
  stack.frames = {python("/work/job.py", "step", 3)};
  EXPECT_EQ(printed(stack), "    > /work/job.py:3 step\n");
  stack.cuts.native_frames_cut = true;
  TextOptions options;
  options.max_native_frames_python = 0;
  EXPECT_EQ(printed(stack, options),
            "    > /work/job.py:3 step\n"
            "      native: none kept (cut at MEMTRACE_MAX_FRAMES_PYTHON=0)\n");
  EXPECT_EQ(printed(ResolvedStack{}), "      (no stack)\n");
}

TEST(SiteLines, LayerUnknownNamesTheInnermostFrame) {
  // A Python program's own extension (tests/e2e/python/deep_python_stack.py): its innermost function, shortened.
  ResolvedStack stack;
  stack.frames = {native("(anonymous namespace)::descend_and_allocate(int)", "libe2e_deep_alloc.so", 0x23fa),
                  native("libe2e_deep_alloc.so+0x2400", "libe2e_deep_alloc.so", 0x2400),
                  python("/work/job.py", "step", 3)};
  EXPECT_EQ(printed(stack),
            "    > /work/job.py:3 step\n"
            "      native: (anonymous namespace)::descend_and_allocate() in libe2e_deep_alloc.so (2 frames, 1 not "
            "symbolized on this machine; --all-frames shows them)\n");
  // Not symbolized here: the module alone.
  stack.frames.erase(stack.frames.begin());
  EXPECT_EQ(
      printed(stack),
      "    > /work/job.py:3 step\n"
      "      native: in libe2e_deep_alloc.so (1 frame, not symbolized on this machine; --all-frames shows them)\n");
}

TEST(SiteLines, HostileNamesAreWrittenOutInEveryLine) {
  // A trace is the traced program's bytes: an escape sequence in a path, a function or a module must not reach
  // the terminal, in the folded lines too.
  ResolvedStack stack;
  stack.frames = {
      native("x", "lib\x1b[2Jevil.so", 0x10),
      library("ev\x1bil/a.py", "f\r", 1),
      library("ev\x1bil/b.py", "g", 2),
      library("ev\x1bil/c.py", "h", 3),
      python("/work/\x1b]0;owned\x07job.py", "step\n", 3),
  };
  EXPECT_EQ(printed(stack),
            "      ev\\x1bil/a.py:1 f\\r\n"
            "      ... 2 more library frames: ev\\x1bil\n"
            "    > /work/\\x1b]0;owned\\x07job.py:3 step\\n\n"
            "      native: x in lib\\x1b[2Jevil.so (1 frame; --all-frames shows them)\n");
}

}  // namespace
}  // namespace memtrace
