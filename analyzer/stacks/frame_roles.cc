#include "stacks/frame_roles.h"

#include <array>

namespace memtrace {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// The identifier that ends at `end` (exclusive) in a qualified name: letters, digits and '_'.
std::string_view identifier_before(std::string_view name, size_t end) {
  size_t begin = end;
  while (begin > 0) {
    char c = name[begin - 1];
    bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!word) break;
    --begin;
  }
  return name.substr(begin, end - begin);
}

// "lib/python3.12/" and the like: CPython's standard library directory.
bool under_python_lib(std::string_view file) {
  size_t at = file.find("/lib/python");
  if (at == std::string_view::npos) return false;
  size_t i = at + 11;  // past "/lib/python"
  while (i < file.size() && ((file[i] >= '0' && file[i] <= '9') || file[i] == '.')) ++i;
  return i < file.size() && file[i] == '/';
}

}  // namespace

SourceKind python_source_kind(std::string_view file) {
  if (contains(file, "/site-packages/") || contains(file, "/dist-packages/")) return SourceKind::kLibrary;
  if (starts_with(file, "<frozen ")) return SourceKind::kStandardLibrary;
  if (under_python_lib(file)) return SourceKind::kStandardLibrary;
  return SourceKind::kUser;
}

bool is_user_frame(const Frame& frame) {
  return frame.python && python_source_kind(frame.file) == SourceKind::kUser;
}

std::optional<std::string> aten_operator(std::string_view function) {
  constexpr std::string_view kPrefix = "at::_ops::";
  if (!starts_with(function, kPrefix)) return std::nullopt;
  std::string_view rest = function.substr(kPrefix.size());
  size_t end = rest.find("::");
  if (end == std::string_view::npos || end == 0) return std::nullopt;
  std::string_view method = rest.substr(end + 2);
  if (!starts_with(method, "call") && !starts_with(method, "redispatch")) return std::nullopt;
  return "aten::" + std::string(rest.substr(0, end));
}

std::optional<std::string> autograd_node(std::string_view function) {
  constexpr std::string_view kGenerated = "torch::autograd::generated::";
  if (starts_with(function, kGenerated)) {
    std::string_view rest = function.substr(kGenerated.size());
    std::string_view name = identifier_before(rest, rest.find_first_of(":(<") == std::string_view::npos
                                                        ? rest.size()
                                                        : rest.find_first_of(":(<"));
    constexpr std::string_view kFunctional = "_apply_functional";
    if (name.size() > kFunctional.size() && name.substr(name.size() - kFunctional.size()) == kFunctional) {
      name = name.substr(0, name.size() - kFunctional.size());
    }
    if (!name.empty()) return std::string(name);
    return std::nullopt;
  }
  if (starts_with(function, "torch::autograd::AccumulateGrad::")) return std::string("AccumulateGrad");
  return std::nullopt;
}

AllocatingLayer allocating_layer(const ResolvedStack& stack) {
  for (const Frame& frame : stack.frames) {
    if (frame.python) break;
    if (starts_with(frame.module, "libcublas")) return AllocatingLayer::kCublas;
    if (starts_with(frame.module, "libcudnn")) return AllocatingLayer::kCudnn;
    if (starts_with(frame.module, "libnccl")) return AllocatingLayer::kNccl;
    if (contains(frame.function, "CUDACachingAllocator") || contains(frame.function, "CudaMallocAsync")) {
      return AllocatingLayer::kPyTorchAllocator;
    }
  }
  return AllocatingLayer::kOther;
}

const char* allocating_layer_name(AllocatingLayer layer) {
  switch (layer) {
    case AllocatingLayer::kPyTorchAllocator: return "PyTorch allocator";
    case AllocatingLayer::kCublas: return "cuBLAS workspace";
    case AllocatingLayer::kCudnn: return "cuDNN";
    case AllocatingLayer::kNccl: return "NCCL";
    case AllocatingLayer::kOther: break;
  }
  return "other";
}

std::string shorten_cpp_name(std::string_view function) {
  // Drops everything inside <...> and (...) except the brackets themselves, leaving "operator()" and the
  // comparison operators alone. Depth is tracked per bracket kind; any imbalance returns the name unchanged.
  std::string out;
  out.reserve(function.size());
  int angle = 0, paren = 0;
  for (size_t i = 0; i < function.size(); ++i) {
    char c = function[i];
    if (angle == 0 && paren == 0 && starts_with(function.substr(i), "operator")) {
      std::string_view rest = function.substr(i + 8);
      for (std::string_view op : std::array<std::string_view, 6>{"()", "<<=", ">>=", "<<", ">>", "<="}) {
        if (starts_with(rest, op)) {
          out.append("operator").append(op);
          i += 8 + op.size() - 1;
          goto next;
        }
      }
      for (std::string_view op : std::array<std::string_view, 4>{">=", "->", "<", ">"}) {
        if (starts_with(rest, op)) {
          out.append("operator").append(op);
          i += 8 + op.size() - 1;
          goto next;
        }
      }
    }
    if (starts_with(function.substr(i), "(anonymous namespace)") && angle == 0 && paren == 0) {
      out.append("(anonymous namespace)");
      i += 20;
      continue;
    }
    if (c == '<' && paren == 0) {
      if (angle++ == 0) out.push_back('<');
      continue;
    }
    if (c == '>' && paren == 0) {
      if (angle == 0) return std::string(function);
      if (--angle == 0) out.push_back('>');
      continue;
    }
    if (c == '(') {
      if (paren++ == 0 && angle == 0) out.push_back('(');
      continue;
    }
    if (c == ')') {
      if (paren == 0) return std::string(function);
      if (--paren == 0 && angle == 0) out.push_back(')');
      continue;
    }
    if (angle == 0 && paren == 0) out.push_back(c);
  next:;
  }
  if (angle != 0 || paren != 0) return std::string(function);
  return out;
}

}  // namespace memtrace
