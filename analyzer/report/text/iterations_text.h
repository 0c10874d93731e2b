// The text of the per-iteration analysis (analysis/iteration_report.h): summary's iterations section, the
// traps, and the leak report's growth per iteration rolled up under the user's line.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "analysis/iteration_report.h"
#include "report/text/report_text.h"

namespace memtrace {

// "+2.00 MiB", "-512 B", "+0 B".
std::string signed_bytes(int64_t bytes);

// "Iterations: 12, from the loop in train whose body starts at iteration_jobs.py:72 (device 0)", the growth per
// iteration, then one line per iteration (the first and last `options.top` where there are more than twice as many):
// its peak allocated and the phase it happened in, and allocated at its end. Nothing where no iteration was found.
void print_iterations(std::ostream& out, const IterationReport& report, const TextOptions& options);

// "Traps:" and each trap found, with its figures and what to change; nothing where none.
void print_traps(std::ostream& out, const IterationReport& report);

// Where iterations were found, a section of the growing sites rolled up under the user's line (LeakGroup), each
// group's sites beneath (the first `options.top`); where none was found and some leak site grows, the line saying
// that growth is measured by time (step after step) instead.
void print_leak_groups(std::ostream& out, const Analysis& analysis, const IterationReport& report,
                       FrameResolver& resolver, const TextOptions& options);

}  // namespace memtrace
