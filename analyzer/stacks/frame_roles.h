// What one frame is to a PyTorch user: their own code or a library's, the ATen operator or the autograd node it
// runs, the layer that allocated. Reports read call sites through these (report/text), and the iteration and leak
// analyses find the user's lines with them. Pure functions of frame text: no trace needed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "stacks/frames.h"

namespace memtrace {

// Where a Python source file belongs, from its path alone (as CPython recorded co_filename):
//   kLibrary          under a site-packages or dist-packages directory (pip, conda and Debian installs);
//   kStandardLibrary  under <prefix>/lib/pythonX.Y/ outside those, or a frozen module ("<frozen runpy>");
//   kUser             anything else: the user's own scripts and packages (also "<string>", "<stdin>", and a
//                     library installed editable from a source checkout, which has no site-packages path).
enum class SourceKind { kUser, kLibrary, kStandardLibrary };
SourceKind python_source_kind(std::string_view file);

// True for a Python frame whose file is the user's own code (python_source_kind == kUser). A Python frame with no
// file (one the trace did not define) is not: nothing says it is the user's.
bool is_user_frame(const Frame& frame);

// A Python source path as a user reads it: a library's from its package on
// ("/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py" -> "torch/nn/modules/module.py"), the
// standard library's from inside lib/pythonX.Y ("/usr/lib/python3.12/runpy.py" -> "runpy.py"); the user's own
// files, frozen modules and anything else unchanged.
std::string_view python_display_path(std::string_view file);

// The package a library or standard library file belongs to, as folded runs of frames name it: the first path
// component of python_display_path for a library, without ".py" for a single-file module ("six.py" -> "six"),
// and "the standard library" for the standard library. "" for the user's own files.
std::string python_package(std::string_view file);

// The ATen operator a demangled native function runs: "at::_ops::addmm::call(...)" and
// "at::_ops::addmm::redispatch(...)" give "aten::addmm". The name is ATen's generated struct name, which is the
// operator or <operator>_<overload> ("at::_ops::mul_Tensor::redispatch" gives "aten::mul_Tensor"): the two cannot
// be told apart from the name alone. nullopt for any other function.
std::optional<std::string> aten_operator(std::string_view function);

// The autograd node a demangled native function is part of: "torch::autograd::generated::AddmmBackward0::apply(...)"
// and "torch::autograd::generated::AddmmBackward0_apply_functional(...)" give "AddmmBackward0"; the hand-written
// nodes "torch::autograd::AccumulateGrad::...", "torch::autograd::CopyBackwards::apply(...)" and
// "torch::autograd::CopySlices::apply(...)" give their class name, and a templated member with its return type
// ("void torch::autograd::AccumulateGrad::accumulateGrad<...>(...)") too. The generated helpers
// ("torch::autograd::generated::details::mm_mat1_backward(...)") are no node: nullopt, as for any other function.
std::optional<std::string> autograd_node(std::string_view function);

// The layer that asked CUDA for the memory, from the native frames of a stack inner of its first Python frame:
//   kCublas           a cuBLAS workspace: PyTorch's (at::cuda::getCUDABlasLtWorkspace, setWorkspaceForHandle,
//                     getCurrentCUDABlasHandle, through its caching allocator) or cuBLAS's own (module libcublas*);
//   kCudnn, kNccl     the library's own allocation (module libcudnn*, libnccl*);
//   kPyTorchAllocator PyTorch's caching allocator (a c10::cuda::CUDACachingAllocator or CudaMallocAsync function,
//                     or a frame in libc10_cuda.so, which holds both, where the frames are not symbolized);
//   kCudaApi          the CUDA runtime or driver called straight from the program: the innermost native frame is in
//                     libcudart/libcuda, or in libffi/_ctypes (Python calling the CUDA API through ctypes);
//   kOther            anything else (a C++ program's own cudaMalloc: its frame is the program's).
// Library modules are told first (a cuBLAS workspace goes through PyTorch's allocator), then the allocator.
enum class AllocatingLayer { kOther, kPyTorchAllocator, kCublas, kCudnn, kNccl, kCudaApi };
AllocatingLayer allocating_layer(const ResolvedStack& stack);
// "PyTorch allocator", "cuBLAS workspace", "cuDNN", "NCCL", "CUDA driver/runtime", "other".
const char* allocating_layer_name(AllocatingLayer layer);

// What a stack's native frames say, for the one line a report folds them into.
struct NativeRoles {
  // The outermost ATen operator among the native frames inner of the first Python frame: the operator the Python
  // code called ("aten::zeros", not the "aten::empty" it runs inside); nullopt where none shows one.
  std::optional<std::string> aten_operator;
  // The innermost autograd node among all native frames (the node running when it allocated).
  std::optional<std::string> autograd_node;
  AllocatingLayer layer = AllocatingLayer::kOther;
  // The module of the innermost native frame ("" when it is outside every module or there is none).
  std::string innermost_module;
};
NativeRoles native_roles(const ResolvedStack& stack);

// A demangled C++ name without argument lists and template arguments, as heaptrack's "shorten templates":
// "std::vector<int>::push_back(int const&)" -> "std::vector<>::push_back()",
// "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::...>::call(...) const" ->
// "c10::impl::wrap_kernel_functor_unboxed_<>::call() const". "(anonymous namespace)" is kept; "operator()" and
// the comparison and shift operators keep their own brackets. A name with unbalanced brackets (a cut or
// non-C++ name) is returned unchanged.
std::string shorten_cpp_name(std::string_view function);

}  // namespace memtrace
