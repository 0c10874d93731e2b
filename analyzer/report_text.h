// The human-readable reports (summary and leaks). Frames one per line: Python as `file:line function`,
// native as `function (module+0xoff) file:line`; the interpreter's own native frames are hidden unless
// `show_interpreter_frames`.
#pragma once

#include <cstddef>
#include <ostream>

#include "analysis.h"
#include "frames.h"

namespace memtrace {

struct TextOptions {
  size_t top = 10;  // call sites shown per list
  bool show_interpreter_frames = false;
};

void print_trace_overview(std::ostream& out, const Analysis& analysis);
void print_devices(std::ostream& out, const Analysis& analysis, FrameResolver& resolver, const TextOptions& options);
void print_leaks(std::ostream& out, const Analysis& analysis, FrameResolver& resolver, const TextOptions& options);
void print_ooms(std::ostream& out, const Analysis& analysis, FrameResolver& resolver, const TextOptions& options);
void print_health(std::ostream& out, const Analysis& analysis);

}  // namespace memtrace
