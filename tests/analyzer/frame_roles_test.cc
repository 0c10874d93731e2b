// frame_roles.h: user code or library from a Python path, the ATen operator and autograd node of a demangled name,
// the layer that allocated, and shortened C++ names. The names are real ones, from the native frames of PyTorch 2.11
// traces (memtrace summary of tests/gpu/iteration_jobs.py's train and hf_eval jobs); the expected strings are
// worked out by hand from the rule each function's comment states.
#include <gtest/gtest.h>

#include <string>

#include "stacks/frame_roles.h"

namespace memtrace {
namespace {

// Real demangled names, as the symbolizer gives them.
constexpr const char* kAllocFoundBlock =
    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_found_block(c10::cuda::"
    "CUDACachingAllocator::Native::(anonymous namespace)::AllocParams const&, unsigned long, "
    "std::shared_ptr<c10::GatheredContext>, bool)";
constexpr const char* kWrapAddmm =
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::"
    "CompileTimeFunctionPointer<at::Tensor (at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar "
    "const&, c10::Scalar const&), &at::(anonymous namespace)::wrapper_CUDA_addmm>, at::Tensor, "
    "c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, "
    "c10::Scalar const&> >, at::Tensor (at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar "
    "const&, c10::Scalar const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&, at::Tensor "
    "const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)";
constexpr const char* kAddmmCall =
    "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar "
    "const&)";
constexpr const char* kMulRedispatch =
    "at::_ops::mul_Tensor::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)";
constexpr const char* kAddmmBackwardFunctional =
    "torch::autograd::generated::AddmmBackward0_apply_functional(std::vector<at::Tensor, std::allocator<at::Tensor> "
    ">&&, std::array<bool, 3ul>, c10::Scalar&, c10::Scalar&, at::Tensor&, c10::Layout&, std::vector<c10::SymInt, "
    "std::allocator<c10::SymInt> >&, std::vector<c10::SymInt, std::allocator<c10::SymInt> >&, at::Tensor&, "
    "c10::Layout&, std::vector<c10::SymInt, std::allocator<c10::SymInt> >&, std::vector<c10::SymInt, "
    "std::allocator<c10::SymInt> >&)";
constexpr const char* kMeanBackwardApply =
    "torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)";
constexpr const char* kMmMat1Backward =
    "torch::autograd::generated::details::mm_mat1_backward(at::Tensor const&, at::Tensor const&, "
    "c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::Layout, c10::Scalar const&)";
constexpr const char* kGemmAndBias =
    "bool at::cuda::blas::gemm_and_bias<float, float>(bool, bool, long, long, long, at::OpMathType<float>::type, "
    "float const*, long, float const*, long, float const*, float*, long, "
    "at::cuda::blas::GEMMAndBiasActivationEpilogue)";
constexpr const char* kNodeCall =
    "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)";

constexpr const char* kTorchModule = "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/module.py";

Frame native(std::string function, std::string module = "libtorch_cpu.so") {
  Frame f;
  f.function = std::move(function);
  f.module = std::move(module);
  return f;
}

Frame python(std::string file, std::string function = "f", uint32_t line = 1) {
  Frame f;
  f.python = true;
  f.file = std::move(file);
  f.function = std::move(function);
  f.line = line;
  return f;
}

TEST(FrameRoles, SourceKindFromThePath) {
  EXPECT_EQ(python_source_kind(kTorchModule), SourceKind::kLibrary);
  EXPECT_EQ(python_source_kind("/usr/lib/python3/dist-packages/numpy/core/numeric.py"), SourceKind::kLibrary);
  EXPECT_EQ(python_source_kind("/usr/lib/python3.12/runpy.py"), SourceKind::kStandardLibrary);
  EXPECT_EQ(python_source_kind("<frozen runpy>"), SourceKind::kStandardLibrary);
  EXPECT_EQ(python_source_kind("/work/main/tests/gpu/iteration_jobs.py"), SourceKind::kUser);
  EXPECT_EQ(python_source_kind("<string>"), SourceKind::kUser);
  // "/lib/python" without a version is no standard library directory.
  EXPECT_EQ(python_source_kind("/home/me/lib/python/tools.py"), SourceKind::kUser);
}

TEST(FrameRoles, UserFrameIsAPythonFrameOfTheUsersFile) {
  EXPECT_TRUE(is_user_frame(python("/work/main/tests/gpu/iteration_jobs.py")));
  EXPECT_FALSE(is_user_frame(python(kTorchModule)));
  EXPECT_FALSE(is_user_frame(python("")));  // a frame the trace did not define
  Frame native_frame = native("main", "e2e_alloc_basic");
  native_frame.file = "../tests/e2e/alloc_basic.cc";
  EXPECT_FALSE(is_user_frame(native_frame));
}

TEST(FrameRoles, DisplayPathFromThePackageOn) {
  EXPECT_EQ(python_display_path(kTorchModule), "torch/nn/modules/module.py");
  EXPECT_EQ(python_display_path("/usr/lib/python3.12/runpy.py"), "runpy.py");
  EXPECT_EQ(python_display_path("/usr/lib/python3.12/json/decoder.py"), "json/decoder.py");
  EXPECT_EQ(python_display_path("<frozen runpy>"), "<frozen runpy>");
  EXPECT_EQ(python_display_path("/work/main/tests/gpu/iteration_jobs.py"), "/work/main/tests/gpu/iteration_jobs.py");
  // A virtual environment's site-packages under a standard library directory: from the package on.
  EXPECT_EQ(python_display_path("/usr/lib/python3.12/site-packages/six.py"), "six.py");
}

TEST(FrameRoles, PackageNamesTheRun) {
  EXPECT_EQ(python_package(kTorchModule), "torch");
  EXPECT_EQ(python_package("/opt/torch/.venv/lib/python3.12/site-packages/transformers/activations.py"),
            "transformers");
  EXPECT_EQ(python_package("/usr/lib/python3/dist-packages/six.py"), "six");
  EXPECT_EQ(python_package("/usr/lib/python3.12/runpy.py"), "the standard library");
  EXPECT_EQ(python_package("/work/main/tests/gpu/iteration_jobs.py"), "");
}

TEST(FrameRoles, AtenOperatorFromOpsCallAndRedispatch) {
  EXPECT_EQ(aten_operator(kAddmmCall), "aten::addmm");
  EXPECT_EQ(aten_operator(kMulRedispatch), "aten::mul_Tensor");
  EXPECT_EQ(aten_operator("at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>)"), "aten::empty_strided");
  EXPECT_EQ(aten_operator(kWrapAddmm), std::nullopt);  // names addmm only inside its template arguments
  EXPECT_EQ(aten_operator("at::native::linear(at::Tensor const&, at::Tensor const&)"), std::nullopt);
  EXPECT_EQ(aten_operator("at::_ops::addmm::schema()"), std::nullopt);
  EXPECT_EQ(aten_operator("at::_ops::"), std::nullopt);
  EXPECT_EQ(aten_operator("libtorch_cpu.so+0x27f4155"), std::nullopt);
}

TEST(FrameRoles, AutogradNodeFromGeneratedAndHandWrittenNodes) {
  EXPECT_EQ(autograd_node(kAddmmBackwardFunctional), "AddmmBackward0");
  EXPECT_EQ(autograd_node(kMeanBackwardApply), "MeanBackward0");
  EXPECT_EQ(autograd_node("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, "
                          "std::allocator<at::Tensor> >&&)"),
            "AccumulateGrad");
  // A template instance's name starts with its return type.
  EXPECT_EQ(autograd_node("void torch::autograd::AccumulateGrad::accumulateGrad<torch::autograd::AccumulateGrad::"
                          "apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)::{lambda(at::Tensor&&)#1}>("
                          "at::Tensor const&, at::Tensor&, at::Tensor const&, long, unsigned long, "
                          "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> "
                          ">&&)::{lambda(at::Tensor&&)#1} const&)"),
            "AccumulateGrad");
  EXPECT_EQ(autograd_node(kMmMat1Backward), std::nullopt);  // a helper in generated::details, no node
  EXPECT_EQ(autograd_node(kNodeCall), std::nullopt);
  EXPECT_EQ(autograd_node(kAddmmCall), std::nullopt);
}

TEST(FrameRoles, ShortenedNamesLoseArgumentsAndTemplateArguments) {
  EXPECT_EQ(shorten_cpp_name(kAllocFoundBlock),
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_found_block()");
  EXPECT_EQ(shorten_cpp_name(kWrapAddmm), "c10::impl::wrap_kernel_functor_unboxed_<>::call()");
  EXPECT_EQ(shorten_cpp_name(kGemmAndBias), "bool at::cuda::blas::gemm_and_bias<>()");
  EXPECT_EQ(shorten_cpp_name("at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, "
                             "c10::TensorOptions const&)"),
            "at::(anonymous namespace)::create_out()");
  EXPECT_EQ(shorten_cpp_name(kNodeCall), "torch::autograd::Node::operator()()");
  EXPECT_EQ(shorten_cpp_name("std::vector<int>::push_back(int const&)"), "std::vector<>::push_back()");
  EXPECT_EQ(shorten_cpp_name("std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char const*)"),
            "std::ostream& std::operator<< <>()");
  EXPECT_EQ(shorten_cpp_name("foo()::{lambda(int)#1}::operator()(int) const"),
            "foo()::{lambda()#1}::operator()() const");
  // "operator" inside a longer identifier is a name: its brackets are dropped like any other.
  EXPECT_EQ(shorten_cpp_name("my_operator<int>(int)"), "my_operator<>()");
  EXPECT_EQ(shorten_cpp_name("main"), "main");
  EXPECT_EQ(shorten_cpp_name("libgone.so+0x10"), "libgone.so+0x10");
  // Unbalanced (a name cut short in the trace): unchanged.
  EXPECT_EQ(shorten_cpp_name("std::vector<int, std::alloc"), "std::vector<int, std::alloc");
  EXPECT_EQ(shorten_cpp_name("f(int))"), "f(int))");
}

TEST(FrameRoles, LayerFromTheNativeFramesInnerOfPython) {
  ResolvedStack stack;
  // A forward allocation: caching allocator, then the operator.
  stack.frames = {native(kAllocFoundBlock, "libc10_cuda.so"), native(kAddmmCall), python(kTorchModule)};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kPyTorchAllocator);
  // Unsymbolized: libc10_cuda.so alone says it.
  stack.frames = {native("libc10_cuda.so+0x43e11", "libc10_cuda.so"), python(kTorchModule)};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kPyTorchAllocator);
  // A cuBLAS workspace through the caching allocator (train's site #1).
  stack.frames = {native(kAllocFoundBlock, "libc10_cuda.so"),
                  native("at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)", "libtorch_cuda.so"),
                  native("at::cuda::getCUDABlasLtWorkspace()", "libtorch_cuda.so"),
                  native(kGemmAndBias, "libtorch_cuda.so"), native(kAddmmCall)};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kCublas);
  // A workspace frame outer of the operator that allocated says nothing of this allocation.
  stack.frames = {native(kAllocFoundBlock, "libc10_cuda.so"), native(kAddmmCall),
                  native("at::cuda::getCUDABlasLtWorkspace()", "libtorch_cuda.so")};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kPyTorchAllocator);
  stack.frames = {native("cublasLtMatmul", "libcublasLt.so.12"), native(kAddmmCall)};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kCublas);
  stack.frames = {native("cudnnCreate", "libcudnn.so.9")};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kCudnn);
  stack.frames = {native("ncclCommInitRank", "libnccl.so.2")};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kNccl);
  // ctypes calling cudaMalloc (tests/e2e/python/leak.py): the innermost frame is libffi's.
  stack.frames = {native("libffi.so.8+0x9f6a", "libffi.so.8"), native("ffi_call", "libffi.so.8"),
                  python("/work/main/tests/e2e/leak.py")};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kCudaApi);
  // A C++ program's own cudaMalloc: its own frame.
  stack.frames = {native("main", "e2e_alloc_basic")};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kOther);
  // libc10_cuda.so outer of the first Python frame is not this allocation's.
  stack.frames = {native("main", "e2e_alloc_basic"), python("/work/job.py"), native("x", "libc10_cuda.so")};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kOther);
  stack.frames = {};
  EXPECT_EQ(allocating_layer(stack), AllocatingLayer::kOther);
  EXPECT_STREQ(allocating_layer_name(AllocatingLayer::kCudaApi), "CUDA driver/runtime");
  EXPECT_STREQ(allocating_layer_name(AllocatingLayer::kCublas), "cuBLAS workspace");
}

TEST(FrameRoles, NativeRolesOutermostOperatorInnermostNode) {
  ResolvedStack stack;
  // The autograd thread's stack of train's site #2, shortened to the frames that matter.
  stack.frames = {native(kAllocFoundBlock, "libc10_cuda.so"),
                  native("at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>)"),
                  native("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)"),
                  native(kMmMat1Backward),
                  native(kAddmmBackwardFunctional),
                  native("torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor, "
                         "std::allocator<at::Tensor> >&&)"),
                  native(kMeanBackwardApply),
                  python("/work/main/tests/gpu/iteration_jobs.py", "train", 75),
                  native(kAddmmCall)};
  NativeRoles roles = native_roles(stack);
  EXPECT_EQ(roles.aten_operator, "aten::mm");  // outermost inner of Python; addmm is outer of it
  EXPECT_EQ(roles.autograd_node, "AddmmBackward0");
  EXPECT_EQ(roles.layer, AllocatingLayer::kPyTorchAllocator);
  EXPECT_EQ(roles.innermost_module, "libc10_cuda.so");

  stack.frames = {python("/work/job.py")};
  roles = native_roles(stack);
  EXPECT_EQ(roles.aten_operator, std::nullopt);
  EXPECT_EQ(roles.autograd_node, std::nullopt);
  EXPECT_EQ(roles.layer, AllocatingLayer::kOther);
  EXPECT_EQ(roles.innermost_module, "");
}

}  // namespace
}  // namespace memtrace
