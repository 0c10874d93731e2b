// The text of `memtrace diff BEFORE AFTER` (analysis/diff.h): the two traces, per device the peak allocated
// before -> after (with iterations, growth per iteration and the peak's categories where known), then the call
// sites that moved most, each with its frames as the other reports print them (print_site_frames).
#pragma once

#include <ostream>

#include "analysis/diff.h"
#include "report/text/report_text.h"

namespace memtrace {

// One side of the diff: the analyzed trace and the resolver of its stacks.
struct DiffSide {
  const Analysis& analysis;
  FrameResolver& resolver;
};

// Prints the diff. A site's frames come from AFTER where the site is there (the program as it is now), else from
// BEFORE. options.top: the sites shown.
void print_diff(std::ostream& out, const DiffSide& before, const DiffSide& after, const DiffResult& diff,
                const TextOptions& options);

// "+56.00 MiB (+58,720,256 B)", "-512 B", "no change".
std::string format_bytes_change(int64_t change_bytes);

}  // namespace memtrace
