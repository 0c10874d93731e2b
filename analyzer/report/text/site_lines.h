// How one call site's stack reads in the text reports (docs/reports.md, "How a call site reads"). A stack with
// Python frames reads as a PyTorch user reads it: the Python frames first, innermost first, the user's own lines
// marked "> ", library frames from their package on with long runs folded into one line, then every native frame
// folded into one line naming the autograd node, the ATen operator and the layer that allocated (frame_roles.h).
// A stack without Python frames (a C++ program) lists its native frames with C++ names shortened. --all-frames
// lists every frame of every stack with its full name. Every line goes through terminal_safe: the names are the
// traced program's bytes. --json is not made here: it keeps every frame.
#pragma once

#include <cstddef>
#include <ostream>

#include "report/text/report_text.h"
#include "stacks/frames.h"

namespace memtrace {

// What a call site without a stack is called: "(no stack)", and in a trace that began at attach (analysis.h,
// began_at_attach), where what was live then has none either, the longer line.
inline constexpr const char* kNoStack = "(no stack)";
inline constexpr const char* kNoStackInAttachedTrace =
    "(no stack: allocated before attach, or recorded without a stack)";

// A run of this many library (or standard library) Python frames or more, between two of the user's frames or at
// either end, shows its innermost frame and one line for the rest: "... 18 more library frames: transformers, torch".
inline constexpr size_t kFoldedLibraryRun = 3;

// Prints `stack` as above, one line per entry, each indented for a list entry (6 columns; a user's frame puts its
// marker in the last two). A stack whose Python frames were borrowed from the thread waiting in backward()
// (ResolvedStack::python_frames_from_backward) opens with a line saying so, in every view.
void print_call_site_stack(std::ostream& out, const ResolvedStack& stack, const TextOptions& options);

}  // namespace memtrace
