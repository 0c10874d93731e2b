// Turns a stack id into displayable frames, innermost first: Python frames from the interned
// PythonFrame records, native frames through the Symbolizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stacks/stack_table.h"
#include "stacks/symbolizer.h"

namespace memtrace {

// One frame as reports show it. Python: qualname, source file, line. Native: demangled function
// (or "module+0xoffset" when unknown), source file (or the module's path without debug info), line or 0.
struct Frame {
  std::string function;
  std::string file;
  uint32_t line = 0;
  bool python = false;
  std::string module;          // native: module basename ("" when outside every module)
  uint64_t module_offset = 0;  // native: address - module load address
  bool in_python_interpreter = false;
  bool build_id_mismatch = false;
};

// One stack as reports show it: its frames, innermost first, and where the tracer cut it short.
struct ResolvedStack {
  std::vector<Frame> frames;
  StackCuts cuts;
  bool python_frames_from_backward = false;
};

class FrameResolver {
 public:
  FrameResolver(const StackTable& stacks, Symbolizer& symbolizer) : stacks_(stacks), symbolizer_(symbolizer) {}
  // No frames and no cuts for stack id 0 or an id the trace never defined.
  ResolvedStack resolve(uint64_t stack_id);

 private:
  Frame resolve_frame(uint64_t raw);
  const StackTable& stacks_;
  Symbolizer& symbolizer_;
};

std::string hex(uint64_t value);  // "0x1f"

}  // namespace memtrace
