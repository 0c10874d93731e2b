#include "stacks/folded_stack.h"

#include <algorithm>

#include "stacks/frame_roles.h"

namespace memtrace {
namespace {

bool unsymbolized(const Frame& f) { return !f.python && !f.module.empty() && f.function.rfind(f.module + "+", 0) == 0; }

// Who allocated where frame_roles cannot name the layer: the innermost native frame.
std::string unknown_layer(const Frame& innermost, const NativeRoles& roles) {
  if (roles.innermost_module.empty()) return "outside every known module";
  if (innermost.python || unsymbolized(innermost)) return "in " + roles.innermost_module;
  return shorten_cpp_name(innermost.function) + " in " + roles.innermost_module;
}

FoldedFrame python_frame(const Frame& f) {
  FoldedFrame folded;
  folded.label = std::string(python_display_path(f.file)) + ':' + std::to_string(f.line) + ' ' + f.function;
  folded.python = true;
  folded.user = is_user_frame(f);
  folded.file = f.file;
  folded.line = f.line;
  return folded;
}

FoldedFrame native_frame(const Frame& f) {
  FoldedFrame folded;
  folded.label = unsymbolized(f) ? f.function : shorten_cpp_name(f.function);
  folded.file = f.file;
  folded.line = f.line;
  return folded;
}

}  // namespace

std::string native_summary(const ResolvedStack& stack) {
  const Frame* innermost_native = nullptr;
  for (const Frame& f : stack.frames)
    if (!f.python) {
      innermost_native = &f;
      break;
    }
  if (!innermost_native) return "";
  NativeRoles roles = native_roles(stack);
  std::string what;
  if (roles.autograd_node) what = "autograd node " + *roles.autograd_node;
  if (roles.aten_operator) what += (what.empty() ? "" : ", ") + *roles.aten_operator;
  std::string layer = roles.layer != AllocatingLayer::kOther ? allocating_layer_name(roles.layer)
                                                             : unknown_layer(stack.frames.front(), roles);
  return what.empty() ? layer : what + " -> " + layer;
}

std::vector<FoldedFrame> fold_stack(const ResolvedStack& stack) {
  std::vector<FoldedFrame> folded;
  const bool has_python =
      std::any_of(stack.frames.begin(), stack.frames.end(), [](const Frame& f) { return f.python; });
  // stack.frames is innermost first: walk it backwards for root first.
  for (auto f = stack.frames.rbegin(); f != stack.frames.rend(); ++f) {
    if (f->python) folded.push_back(python_frame(*f));
    else if (!has_python && !f->in_python_interpreter) folded.push_back(native_frame(*f));
  }
  if (has_python) {
    std::string native = native_summary(stack);
    if (!native.empty()) folded.push_back(FoldedFrame{"native: " + native});
  }
  if (folded.empty()) folded.push_back(FoldedFrame{"[no stack]"});
  return folded;
}

}  // namespace memtrace
