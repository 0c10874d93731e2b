#include "stacks/frames.h"

#include <cstdio>

namespace memtrace {

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

ResolvedStack FrameResolver::resolve(uint64_t stack_id) {
  ResolvedStack result;
  const std::vector<uint64_t>* raw = stacks_.frames(stack_id);
  if (!raw) return result;
  result.frames.reserve(raw->size());
  for (uint64_t frame : *raw) result.frames.push_back(resolve_frame(frame));
  result.cuts = stacks_.cuts(stack_id);
  result.python_frames_from_backward = stacks_.python_frames_from_backward(stack_id);
  return result;
}

Frame FrameResolver::resolve_frame(uint64_t raw) {
  Frame frame;
  if (raw & kPythonFrameBit) {
    frame.python = true;
    uint64_t id = raw & ~kPythonFrameBit;
    if (const PythonSource* source = stacks_.python_frame(id)) {
      frame.function = source->function;
      frame.file = source->file;
      frame.line = source->line;
    } else {
      frame.function = "<python frame " + std::to_string(id) + " not in trace>";
    }
    return frame;
  }
  const NativeFrame& native = symbolizer_.symbolize(raw);
  frame.module = native.module_name;
  frame.module_offset = native.module_offset;
  frame.in_python_interpreter = native.in_python_interpreter;
  frame.build_id_mismatch = native.build_id_mismatch;
  frame.line = native.line;
  frame.file = native.source_file.empty() ? native.module_path : native.source_file;
  if (native.module_name.empty()) frame.function = hex(raw);
  else if (native.build_id_mismatch)
    frame.function = native.module_name + "+" + hex(native.module_offset) + " (build id mismatch)";
  else if (native.function.empty()) frame.function = native.module_name + "+" + hex(native.module_offset);
  else frame.function = native.function;
  return frame;
}

}  // namespace memtrace
