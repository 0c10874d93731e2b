// A stack as the pictures and the stack-based exports show it (the HTML report's flame graph, pprof, speedscope,
// folded stacks): a list of frame labels, outermost (root) first, folded as the text reports fold a call site
// (report/text/site_lines.h, docs/reports.md "How a call site reads"), so that the same line of the user's code
// is one node however deep the native frames under it go:
//   - a stack with Python frames: its Python frames, outermost first, as "file:line function" (library files from
//     their package on, python_display_path), then one label for all its native frames,
//     "native: autograd node AddmmBackward0, aten::mm -> cuBLAS workspace" (native_summary);
//   - a stack without Python frames (a C++ program): its native frames, outermost first, C++ names shortened
//     (shorten_cpp_name), the interpreter's own frames left out, a frame with no name here as "module+0xoffset";
//   - no frames at all (stack id 0, a stack the trace never defined): the one label "[no stack]".
// Labels are the traced program's bytes, not made terminal-safe: each writer escapes them as its format needs.
#pragma once

#include <string>
#include <vector>

#include "stacks/frames.h"

namespace memtrace {

struct FoldedFrame {
  std::string label;
  bool python = false;  // a Python frame (false for native frames and the folded native label)
  bool user = false;    // a Python frame of the user's own code (is_user_frame)
  std::string file;     // Python frames: the file as recorded; native frames: the source file or ""
  uint32_t line = 0;    // 0 where unknown
};

// `stack` folded as above, outermost first. Never empty.
std::vector<FoldedFrame> fold_stack(const ResolvedStack& stack);

// What a stack's native frames did, in one phrase: "autograd node AddmmBackward0, aten::mm -> cuBLAS workspace";
// the parts not known are left out, and where frame_roles cannot name the layer, the innermost native frame
// ("descend_and_allocate() in libdeep.so", "in libdeep.so", "outside every known module"). "" for a stack without
// native frames.
std::string native_summary(const ResolvedStack& stack);

}  // namespace memtrace
