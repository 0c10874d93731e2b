#include "report/text/site_lines.h"

#include <algorithm>
#include <string>
#include <vector>

#include "stacks/folded_stack.h"
#include "stacks/frame_roles.h"
#include "util/format.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

constexpr const char* kIndent = "      ";
constexpr const char* kUserIndent = "    > ";  // the same 6 columns, the marker in the last two

bool unsymbolized(const Frame& f) { return !f.python && !f.module.empty() && f.function.rfind(f.module + "+", 0) == 0; }

// A native frame as "function (module+0xoff) file:line"; `shorten`: the function through shorten_cpp_name (a name
// made of the module and offset has no C++ brackets to shorten and is left alone).
void print_native_frame(std::ostream& out, const Frame& f, bool shorten) {
  out << kIndent << terminal_safe(shorten && !unsymbolized(f) ? shorten_cpp_name(f.function) : f.function);
  if (!f.module.empty() && !unsymbolized(f))
    out << " (" << terminal_safe(f.module) << '+' << hex(f.module_offset) << ')';
  if (!f.file.empty()) {
    out << ' ' << terminal_safe(f.file);
    if (f.line) out << ':' << f.line;
  }
  out << '\n';
}

// A Python frame as "file:line function", with `file` as given.
void print_python_frame(std::ostream& out, const char* indent, std::string_view file, const Frame& f) {
  out << indent << terminal_safe(file) << ':' << f.line << ' ' << terminal_safe(f.function) << '\n';
}

// One line for a run of frames that have no name here: "[3 frames in libtorch_cpu.so, libc10.so: ...]".
void print_unsymbolized_run(std::ostream& out, const std::vector<const Frame*>& run) {
  std::vector<std::string> modules;
  for (const Frame* f : run)
    if (std::find(modules.begin(), modules.end(), f->module) == modules.end()) modules.push_back(f->module);
  out << kIndent << '[' << count_of(run.size(), "frame") << " in ";
  for (size_t i = 0; i < modules.size(); ++i) out << (i ? ", " : "") << terminal_safe(modules[i]);
  out << ": not symbolized on this machine, --all-frames shows the offsets]\n";
}

// Where the tracer cut a stack's native frames: the limit that applied to it (a stack with Python frames was taken
// on a thread with Python frames). Not "N frames missing": a stack exactly as deep as the limit is marked too.
std::string native_limit(bool has_python, const TextOptions& options) {
  const std::optional<uint32_t>& limit = has_python ? options.max_native_frames_python : options.max_native_frames;
  if (!limit) return "the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)";
  return std::string(has_python ? "the tracer's limit on threads with Python frames, " : "the tracer's limit, ") +
         std::to_string(*limit) + (has_python ? " (MEMTRACE_MAX_FRAMES_PYTHON)" : " (MEMTRACE_MAX_FRAMES)");
}

void print_native_cut(std::ostream& out, bool has_python, const TextOptions& options) {
  out << kIndent << "... native frames stop here: " << native_limit(has_python, options) << '\n';
}

void print_python_cut(std::ostream& out, size_t python_count) {
  out << kIndent << "... outer Python frames past the " << ordinal(python_count) << " not recorded\n";
}

// Every frame in the stack's order (--all-frames, full names), or for a stack without Python frames the native
// frames with shortened names, the interpreter's own hidden and runs of unsymbolized ones one line. Each cut is
// marked right after the last frame of its kind (native frames innermost, Python frames outermost kept): that is
// where the missing frames belong.
void print_listed_frames(std::ostream& out, const ResolvedStack& stack, const TextOptions& options) {
  const std::vector<Frame>& frames = stack.frames;
  size_t native_count = 0, python_count = 0, last_native = 0, last_python = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i].python) last_python = i, ++python_count;
    else last_native = i, ++native_count;
  }
  const bool native_cut = stack.cuts.native_frames_cut, python_cut = stack.cuts.python_frames_cut && python_count;
  const bool has_python = python_count > 0;
  // Where the last native frame kept is one of the interpreter's, hidden in this view, the cut is said in the
  // hidden-frames line instead: a line of its own would stand after frames that are not where the cut is.
  const bool cut_at_hidden =
      native_cut && native_count && !options.all_frames && frames[last_native].in_python_interpreter;
  if (native_cut && native_count == 0) print_native_cut(out, has_python, options);
  size_t hidden = 0;
  std::vector<const Frame*> run;  // pending unsymbolized frames
  auto print_frame = [&](const Frame& f) {
    if (f.python) print_python_frame(out, kIndent, f.file, f);
    else print_native_frame(out, f, /*shorten=*/!options.all_frames);
  };
  auto flush_run = [&] {
    if (run.size() == 1) print_frame(*run[0]);
    else if (!run.empty()) print_unsymbolized_run(out, run);
    run.clear();
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    if (options.all_frames) {
      print_frame(f);
    } else if (f.in_python_interpreter) {
      ++hidden;
    } else if (unsymbolized(f)) {
      run.push_back(&f);
    } else {
      flush_run();
      print_frame(f);
    }
    if (native_cut && native_count && i == last_native && !cut_at_hidden) {
      flush_run();
      print_native_cut(out, has_python, options);
    }
    if (python_cut && i == last_python) print_python_cut(out, python_count);
  }
  flush_run();
  if (!hidden) return;
  out << kIndent << "(" << hidden << " Python interpreter frames hidden";
  if (cut_at_hidden) out << "; the native frames stop at the last: " << native_limit(has_python, options);
  out << ")\n";
}

// "... 18 more library frames: transformers, torch" for `run` (the frames after the one shown), the packages in the
// order the run reaches them.
void print_folded_run(std::ostream& out, const std::vector<const Frame*>& run) {
  std::vector<std::string> packages;
  for (const Frame* f : run) {
    std::string package = python_package(f->file);
    if (!package.empty() && std::find(packages.begin(), packages.end(), package) == packages.end())
      packages.push_back(std::move(package));
  }
  out << kIndent << "... " << run.size() << " more library frame" << (run.size() == 1 ? "" : "s");
  for (size_t i = 0; i < packages.size(); ++i) out << (i ? ", " : ": ") << terminal_safe(packages[i]);
  out << '\n';
}

// "MEMTRACE_MAX_FRAMES_PYTHON=16": the limit that cut a stack's native frames, as the folded line names it.
std::string native_limit_setting(bool python_thread, const TextOptions& options) {
  const char* name = python_thread ? "MEMTRACE_MAX_FRAMES_PYTHON" : "MEMTRACE_MAX_FRAMES";
  const std::optional<uint32_t>& limit = python_thread ? options.max_native_frames_python : options.max_native_frames;
  if (!limit) return "the tracer's limit (MEMTRACE_MAX_FRAMES / MEMTRACE_MAX_FRAMES_PYTHON)";
  return std::string(name) + '=' + std::to_string(*limit);
}

// The one line every native frame of a stack with Python frames folds into:
//   "native: autograd node AddmmBackward0, aten::mm -> cuBLAS workspace (23 frames; --all-frames shows them)".
// The phrase is folded_stack.h's native_summary. The frames of a borrowed stack were taken on the autograd thread,
// which has no Python frames of its own: its cut is the tracer's plain limit.
void print_native_line(std::ostream& out, const ResolvedStack& stack, const TextOptions& options) {
  size_t native_count = 0, unsymbolized_count = 0;
  for (const Frame& f : stack.frames)
    if (!f.python) ++native_count, unsymbolized_count += unsymbolized(f);
  const bool cut = stack.cuts.native_frames_cut;
  if (native_count == 0 && !cut) return;
  const std::string limit = native_limit_setting(!stack.python_frames_from_backward, options);
  if (native_count == 0) {
    out << kIndent << "native: none kept (cut at " << limit << ")\n";
    return;
  }
  out << kIndent << "native: " << terminal_safe(native_summary(stack));
  out << " (" << count_of(native_count, "frame");
  if (unsymbolized_count == native_count) out << ", not symbolized on this machine";
  else if (unsymbolized_count) out << ", " << unsymbolized_count << " not symbolized on this machine";
  if (cut) out << ", cut at " << limit;
  out << "; --all-frames shows them)\n";
}

// The view of a stack with Python frames (the file's header comment).
void print_python_view(std::ostream& out, const ResolvedStack& stack, const TextOptions& options) {
  std::vector<const Frame*> python;
  for (const Frame& f : stack.frames)
    if (f.python) python.push_back(&f);
  for (size_t i = 0; i < python.size();) {
    if (is_user_frame(*python[i])) {
      print_python_frame(out, kUserIndent, python[i]->file, *python[i]);
      ++i;
      continue;
    }
    size_t end = i;
    while (end < python.size() && !is_user_frame(*python[end])) ++end;
    const size_t shown = end - i >= kFoldedLibraryRun ? i + 1 : end;
    for (size_t j = i; j < shown; ++j)
      print_python_frame(out, kIndent, python_display_path(python[j]->file), *python[j]);
    if (shown < end) print_folded_run(out, std::vector<const Frame*>(python.begin() + shown, python.begin() + end));
    i = end;
  }
  if (stack.cuts.python_frames_cut) print_python_cut(out, python.size());
  print_native_line(out, stack, options);
}

}  // namespace

void print_call_site_stack(std::ostream& out, const ResolvedStack& stack, const TextOptions& options) {
  if (stack.python_frames_from_backward)
    out << kIndent << "(on the autograd thread; Python stack of the thread waiting in backward())\n";
  if (stack.frames.empty()) {
    out << kIndent << kNoStack << '\n';
    return;
  }
  const bool has_python =
      std::any_of(stack.frames.begin(), stack.frames.end(), [](const Frame& f) { return f.python; });
  if (has_python && !options.all_frames) print_python_view(out, stack, options);
  else print_listed_frames(out, stack, options);
}

}  // namespace memtrace
