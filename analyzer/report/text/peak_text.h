// The text of the peak breakdown (analysis/peak_breakdown.h): the few lines `memtrace summary` prints at each
// device's peak, and the whole `memtrace peak` report (the breakdown, then what was live as a tree by user line).
#pragma once

#include <ostream>
#include <vector>

#include "analysis/live_tree.h"
#include "analysis/peak_breakdown.h"
#include "report/text/report_text.h"

namespace memtrace {

// The breakdown in a few lines, each indented by `indent`: where the phases come from, the rows of the allocated
// total that are not empty, what lies beside it (cache, outside PyTorch's allocator, context), and the trap where
// a row dominates (peak_dominance).
void print_breakdown_lines(std::ostream& out, const MomentBreakdown& breakdown, const char* indent);

// `memtrace peak`'s report of one device at one moment: a heading (the moment, the totals), every row of the
// breakdown with its bytes and count, what lies beside the allocated total, the trap, then the tree by user line
// (`options.top` user lines, and as many call sites under each). `at_time`: the moment is --at's, not the peak.
// `began_at_attach` (analysis.h): a site without a stack is named as what was live at attach may be.
void print_peak_report(std::ostream& out, const MomentBreakdown& breakdown, const std::vector<UserLineNode>& tree,
                       bool at_time, bool began_at_attach, FrameResolver& resolver, const TextOptions& options);

// A moment as `memtrace peak` prints it, precisely enough to be given back to --at: nanoseconds from trace start
// in seconds to the microsecond, "6.701912 s" (--at takes the last event at or before the time given).
std::string format_moment_seconds(int64_t time_ns);

// One line naming a call site as a user reads it: its innermost Python frame (a library's path from its package
// on, python_display_path), the ATen operator or autograd node
// its native frames show, else its innermost native frame outside PyTorch's caching allocator (shortened).
std::string call_site_line(const ResolvedStack& stack);

}  // namespace memtrace
