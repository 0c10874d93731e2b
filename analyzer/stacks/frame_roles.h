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
//   kLibrary          under a site-packages or dist-packages directory (pip and Debian installs);
//   kStandardLibrary  under <prefix>/lib/pythonX.Y/ outside those, or a frozen module ("<frozen runpy>");
//   kUser             anything else: the user's own scripts and packages (also "<string>", "<stdin>").
enum class SourceKind { kUser, kLibrary, kStandardLibrary };
SourceKind python_source_kind(std::string_view file);

// True for a Python frame whose file is the user's own code (python_source_kind == kUser).
bool is_user_frame(const Frame& frame);

// The ATen operator a demangled native function runs: "at::_ops::addmm::call(...)" and
// "at::_ops::addmm::redispatch(...)" give "aten::addmm". The name is ATen's generated struct name, which is the
// operator or <operator>_<overload> ("at::_ops::add_Tensor::call" gives "aten::add_Tensor"): the two cannot be
// told apart from the name alone. nullopt for any other function.
std::optional<std::string> aten_operator(std::string_view function);

// The autograd node a demangled native function is part of: "torch::autograd::generated::AddmmBackward0::apply(...)"
// and "torch::autograd::generated::AddmmBackward0_apply_functional(...)" give "AddmmBackward0";
// "torch::autograd::AccumulateGrad::apply(...)" gives "AccumulateGrad". nullopt otherwise.
std::optional<std::string> autograd_node(std::string_view function);

// The layer that asked CUDA for the memory, from the innermost native frames of a stack: PyTorch's caching
// allocator (c10::cuda::CUDACachingAllocator), cuBLAS/cuBLASLt (module libcublas*), cuDNN (libcudnn*), NCCL
// (libnccl*), or kOther (the program itself or any other library).
enum class AllocatingLayer { kOther, kPyTorchAllocator, kCublas, kCudnn, kNccl };
AllocatingLayer allocating_layer(const ResolvedStack& stack);
const char* allocating_layer_name(AllocatingLayer layer);  // "PyTorch allocator", "cuBLAS workspace", ...

// A demangled C++ name without argument lists and template arguments, as heaptrack's "shorten templates":
// "std::vector<int>::push_back(int const&)" -> "std::vector<>::push_back()",
// "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::...>::call(...) const" ->
// "c10::impl::wrap_kernel_functor_unboxed_<>::call()". "(anonymous namespace)" is kept; "operator()" and
// "operator<" keep their own brackets. A name with unbalanced brackets is returned unchanged.
std::string shorten_cpp_name(std::string_view function);

}  // namespace memtrace
