#include "report/text/iterations_text.h"

#include <algorithm>

#include "util/format.h"
#include "util/terminal_text.h"

namespace memtrace {

std::string signed_bytes(int64_t bytes) {
  return bytes < 0 ? "-" + format_bytes(uint64_t(0) - uint64_t(bytes)) : "+" + format_bytes(uint64_t(bytes));
}

namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void print_iteration_row(std::ostream& out, size_t k, const IterationMemory& m) {
  out << "    #" << k + 1 << " peak allocated " << format_bytes(m.peak_allocated_bytes) << " in "
      << phase_name(m.peak_phase) << ", allocated at end " << format_bytes(m.allocated_at_end_bytes) << '\n';
}

// The innermost Python frame of a stack as "file:line function" (basename), or its innermost frame.
std::string innermost_line(const ResolvedStack& stack) {
  for (const Frame& f : stack.frames)
    if (f.python) return basename_of(f.file) + ":" + std::to_string(f.line) + " " + f.function;
  if (!stack.frames.empty()) return stack.frames.front().function;
  return "(no stack)";
}

}  // namespace

void print_iterations(std::ostream& out, const IterationReport& r, const TextOptions& options) {
  if (!r.found()) return;
  out << "\nIterations: " << terminal_safe(iterations_found_text(r.phases)) << " (device " << r.figures.device << ")\n";
  if (r.figures.allocated_growth_per_iteration_bytes)
    out << "  growth per iteration: allocated " << signed_bytes(*r.figures.allocated_growth_per_iteration_bytes)
        << ", reserved " << signed_bytes(r.figures.reserved_growth_per_iteration_bytes.value_or(0))
        << " (median of the changes from one iteration's end to the next, from the 2nd iteration on)\n";
  const auto& its = r.figures.iterations;
  size_t n = its.size(), top = std::max<size_t>(options.top, 1);
  for (size_t k = 0; k < n; ++k) {
    if (n > 2 * top && k == top) {
      out << "    ... " << count_of(n - 2 * top, "iteration") << " not shown\n";
      k = n - top - 1;
      continue;
    }
    print_iteration_row(out, k, its[k]);
  }
}

void print_traps(std::ostream& out, const IterationReport& r) {
  if (r.traps.empty()) return;
  out << "\nTraps:\n";
  // A kept tensor's title names the user's line, which is the traced program's text.
  for (const Trap& t : r.traps) out << "  " << terminal_safe(t.title) << "\n    " << terminal_safe(t.advice) << '\n';
}

void print_leak_groups(std::ostream& out, const Analysis& a, const IterationReport& r, FrameResolver& resolver,
                       const TextOptions& options) {
  if (!r.found()) {
    bool growing = std::any_of(a.leaks.begin(), a.leaks.end(), [](const LeakSite& l) { return l.growing; });
    if (growing)
      out << "  No iterations found (no repeating loop in the Python frames, no NVTX ranges): growth is measured "
             "by time, step after step.\n";
    return;
  }
  if (r.groups.empty()) return;
  out << "\nGrowth per iteration by the user's line (what each iteration kept to the last one's end; "
      << terminal_safe(iterations_found_text(r.phases)) << "):\n";
  for (const LeakGroup& g : r.groups) {
    out << "  ";
    if (g.has_python) out << terminal_safe(basename_of(g.file)) << ':' << g.line << ' ' << terminal_safe(g.function);
    else out << "(no Python frames)";
    out << ": " << signed_bytes(int64_t(g.growth_per_iteration_bytes)) << " per iteration across "
        << count_of(g.sites.size(), "allocation site");
    for (size_t i = 0; i < g.libraries.size(); ++i) out << (i ? ", " : " in ") << terminal_safe(g.libraries[i]);
    out << '\n';
    for (size_t j = 0; j < g.sites.size() && j < options.top; ++j)
      out << "    " << signed_bytes(int64_t(g.sites[j].growth_per_iteration_bytes))
          << " per iteration: " << terminal_safe(innermost_line(resolver.resolve(g.sites[j].stack_id))) << '\n';
    if (g.sites.size() > options.top) out << "    ... " << count_of(g.sites.size() - options.top, "site") << " more\n";
  }
}

}  // namespace memtrace
