#include "stacks/frame_roles.h"

#include <array>

namespace memtrace {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The identifier that starts `text`: letters, digits and '_' ("" where it starts with anything else).
std::string_view leading_identifier(std::string_view text) {
  size_t end = 0;
  while (end < text.size() && identifier_char(text[end])) ++end;
  return text.substr(0, end);
}

constexpr std::string_view kAnonymousNamespace = "(anonymous namespace)";

// A demangled name without the return type that names of template instances carry
// ("void torch::autograd::AccumulateGrad::accumulateGrad<...>(...)" -> "torch::autograd::AccumulateGrad::..."):
// what follows the last space outside brackets before the argument list, unless that space belongs to
// "operator new" and the like. Names without a return type come back whole.
std::string_view without_return_type(std::string_view function) {
  int angle = 0;
  size_t name_begin = 0;
  for (size_t i = 0; i < function.size(); ++i) {
    if (starts_with(function.substr(i), kAnonymousNamespace)) {
      i += kAnonymousNamespace.size() - 1;
      continue;
    }
    char c = function[i];
    if (c == '(' && angle == 0) break;  // the argument list
    if (c == '<') ++angle;
    else if (c == '>' && angle > 0) --angle;
    else if (c == ' ' && angle == 0 && !ends_with(function.substr(0, i), "operator")) name_begin = i + 1;
  }
  return function.substr(name_begin);
}

// "lib/python3.12/" and the like: CPython's standard library directory. Returns the offset just past it, or npos.
size_t past_python_lib(std::string_view file) {
  for (size_t at = file.find("/lib/python"); at != std::string_view::npos; at = file.find("/lib/python", at + 1)) {
    size_t i = at + 11;  // past "/lib/python"
    while (i < file.size() && ((file[i] >= '0' && file[i] <= '9') || file[i] == '.')) ++i;
    if (i > at + 11 && i < file.size() && file[i] == '/') return i + 1;
  }
  return std::string_view::npos;
}

// The offset just past the last "/site-packages/" or "/dist-packages/" of `file`, or npos.
size_t past_packages_dir(std::string_view file) {
  size_t best = std::string_view::npos;
  for (std::string_view dir : {std::string_view("/site-packages/"), std::string_view("/dist-packages/")}) {
    size_t at = file.rfind(dir);
    if (at != std::string_view::npos && (best == std::string_view::npos || at + dir.size() > best))
      best = at + dir.size();
  }
  return best;
}

// The cuBLAS workspace functions of PyTorch (aten/src/ATen/cuda/CublasHandlePool.cpp): a workspace they allocate
// comes from the caching allocator, inner of them.
bool cublas_workspace_function(std::string_view name) {
  return starts_with(name, "at::cuda::getCUDABlasLtWorkspace(") ||
         starts_with(name, "at::cuda::setWorkspaceForHandle(") ||
         starts_with(name, "at::cuda::getCurrentCUDABlasHandle(");
}

}  // namespace

SourceKind python_source_kind(std::string_view file) {
  if (past_packages_dir(file) != std::string_view::npos) return SourceKind::kLibrary;
  if (starts_with(file, "<frozen ")) return SourceKind::kStandardLibrary;
  if (past_python_lib(file) != std::string_view::npos) return SourceKind::kStandardLibrary;
  return SourceKind::kUser;
}

bool is_user_frame(const Frame& frame) {
  return frame.python && !frame.file.empty() && python_source_kind(frame.file) == SourceKind::kUser;
}

std::string_view python_display_path(std::string_view file) {
  if (size_t at = past_packages_dir(file); at != std::string_view::npos) return file.substr(at);
  if (starts_with(file, "<frozen ")) return file;
  if (size_t at = past_python_lib(file); at != std::string_view::npos) return file.substr(at);
  return file;
}

std::string python_package(std::string_view file) {
  switch (python_source_kind(file)) {
    case SourceKind::kUser: return "";
    case SourceKind::kStandardLibrary: return "the standard library";
    case SourceKind::kLibrary: break;
  }
  std::string_view path = python_display_path(file);
  std::string_view package = path.substr(0, path.find('/'));
  if (package.size() == path.size() && ends_with(package, ".py")) package.remove_suffix(3);
  return std::string(package);
}

std::optional<std::string> aten_operator(std::string_view function) {
  constexpr std::string_view kPrefix = "at::_ops::";
  std::string_view name = without_return_type(function);
  if (!starts_with(name, kPrefix)) return std::nullopt;
  std::string_view rest = name.substr(kPrefix.size());
  std::string_view op = leading_identifier(rest);
  if (op.empty() || !starts_with(rest.substr(op.size()), "::")) return std::nullopt;
  std::string_view method = leading_identifier(rest.substr(op.size() + 2));
  if (method != "call" && method != "redispatch") return std::nullopt;
  return "aten::" + std::string(op);
}

std::optional<std::string> autograd_node(std::string_view function) {
  constexpr std::string_view kGenerated = "torch::autograd::generated::";
  constexpr std::string_view kFunctional = "_apply_functional";
  std::string_view name = without_return_type(function);
  if (starts_with(name, kGenerated)) {
    std::string_view rest = name.substr(kGenerated.size());
    std::string_view node = leading_identifier(rest);
    std::string_view after = rest.substr(node.size());
    // "<Node>::apply(" (the node's method), or "<Node>_apply_functional(" (the free function it calls).
    if (starts_with(after, "::")) {
      std::string_view method = leading_identifier(after.substr(2));
      if (method == "apply" || method == "apply_with_saved") return std::string(node);
      return std::nullopt;
    }
    if (ends_with(node, kFunctional) && node.size() > kFunctional.size() &&
        (starts_with(after, "(") || starts_with(after, "<")))
      return std::string(node.substr(0, node.size() - kFunctional.size()));
    return std::nullopt;
  }
  for (std::string_view node :
       {std::string_view("AccumulateGrad"), std::string_view("CopyBackwards"), std::string_view("CopySlices")}) {
    std::string prefix = "torch::autograd::" + std::string(node) + "::";
    if (starts_with(name, prefix)) return std::string(node);
  }
  return std::nullopt;
}

AllocatingLayer allocating_layer(const ResolvedStack& stack) {
  bool pytorch_allocator = false;
  for (const Frame& frame : stack.frames) {
    if (frame.python) break;
    if (starts_with(frame.module, "libcublas")) return AllocatingLayer::kCublas;
    if (starts_with(frame.module, "libcudnn")) return AllocatingLayer::kCudnn;
    if (starts_with(frame.module, "libnccl")) return AllocatingLayer::kNccl;
    std::string_view name = without_return_type(frame.function);
    if (cublas_workspace_function(name)) return AllocatingLayer::kCublas;
    if (contains(name, "CUDACachingAllocator") || contains(name, "CudaMallocAsync") ||
        starts_with(frame.module, "libc10_cuda."))
      pytorch_allocator = true;
    // The operator's callers say nothing more about who allocated for it.
    if (aten_operator(frame.function)) break;
  }
  if (pytorch_allocator) return AllocatingLayer::kPyTorchAllocator;
  if (!stack.frames.empty() && !stack.frames[0].python) {
    std::string_view module = stack.frames[0].module;
    if (starts_with(module, "libcudart") || starts_with(module, "libcuda.") || starts_with(module, "libffi") ||
        starts_with(module, "_ctypes"))
      return AllocatingLayer::kCudaApi;
  }
  return AllocatingLayer::kOther;
}

const char* allocating_layer_name(AllocatingLayer layer) {
  switch (layer) {
    case AllocatingLayer::kPyTorchAllocator: return "PyTorch allocator";
    case AllocatingLayer::kCublas: return "cuBLAS workspace";
    case AllocatingLayer::kCudnn: return "cuDNN";
    case AllocatingLayer::kNccl: return "NCCL";
    case AllocatingLayer::kCudaApi: return "CUDA driver/runtime";
    case AllocatingLayer::kOther: break;
  }
  return "other";
}

NativeRoles native_roles(const ResolvedStack& stack) {
  NativeRoles roles;
  roles.layer = allocating_layer(stack);
  if (!stack.frames.empty() && !stack.frames[0].python) roles.innermost_module = stack.frames[0].module;
  bool inner_run = true;  // still inner of the first Python frame
  for (const Frame& frame : stack.frames) {
    if (frame.python) {
      inner_run = false;
      continue;
    }
    if (inner_run)
      if (auto op = aten_operator(frame.function)) roles.aten_operator = std::move(op);
    if (!roles.autograd_node) roles.autograd_node = autograd_node(frame.function);
  }
  return roles;
}

namespace {

// The operators whose names hold brackets, longest first so that "operator<<=" is not read as "operator<<".
constexpr std::array<std::string_view, 10> kBracketOperators = {"<=>", "<<=", ">>=", "()", "<<",
                                                                ">>",  "<=",  ">=",  "->", "<"};

// The length of the operator name starting at `at` ("operator()" -> 10), or 0 where none starts there.
size_t bracket_operator_at(std::string_view function, size_t at) {
  if (!starts_with(function.substr(at), "operator")) return 0;
  if (at > 0 && identifier_char(function[at - 1])) return 0;  // "my_operator(...)": a name, not the keyword
  std::string_view rest = function.substr(at + 8);
  for (std::string_view op : kBracketOperators)
    if (starts_with(rest, op)) return 8 + op.size();
  if (starts_with(rest, ">")) return 9;
  return 0;
}

}  // namespace

std::string shorten_cpp_name(std::string_view function) {
  // Drops everything inside <...> and (...) but the brackets themselves. Depth is tracked per bracket kind;
  // any imbalance returns the name unchanged.
  std::string out;
  out.reserve(function.size());
  int angle = 0, paren = 0;
  for (size_t i = 0; i < function.size(); ++i) {
    const bool outside = angle == 0 && paren == 0;
    if (outside) {
      if (size_t length = bracket_operator_at(function, i)) {
        out.append(function.substr(i, length));
        i += length - 1;
        continue;
      }
      if (starts_with(function.substr(i), kAnonymousNamespace)) {
        out.append(kAnonymousNamespace);
        i += kAnonymousNamespace.size() - 1;
        continue;
      }
    }
    char c = function[i];
    if (c == '<' && paren == 0) {
      if (angle++ == 0) out.push_back('<');
    } else if (c == '>' && paren == 0) {
      if (angle == 0) return std::string(function);
      if (--angle == 0) out.push_back('>');
    } else if (c == '(') {
      if (paren++ == 0 && angle == 0) out.push_back('(');
    } else if (c == ')') {
      if (paren == 0) return std::string(function);
      if (--paren == 0 && angle == 0) out.push_back(')');
    } else if (outside) {
      out.push_back(c);
    }
  }
  if (angle != 0 || paren != 0) return std::string(function);
  return out;
}

}  // namespace memtrace
