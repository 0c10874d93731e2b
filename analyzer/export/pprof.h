// `memtrace export --format pprof`: the trace's memory by call stack as a gzip'ed pprof profile (the subset of
// github.com/google/pprof's profile.proto in export/profile.proto), for `go tool pprof`, pprof's web UI, and the
// tools that read that format (docs/commands/export.md, "pprof"). One Profile, six sample types, as Go's heap
// profiles put several in one (go tool pprof -sample_index=NAME picks one; the default is inuse_space):
//   alloc_objects/count, alloc_space/bytes  every successful allocation of the allocated kind over the whole trace
//                                          (an ALLOC the device's allocated total counts: PyTorch's and pools'
//                                          blocks where the device has them, else its driver memory)
//   exit_objects/count, exit_space/bytes    live at exit: the leak candidates of `memtrace leaks` (at the first
//                                          PYTHON_FINALIZING, else at the end)
//   inuse_objects/count, inuse_space/bytes  live at each device's peak allocated, of the allocated kind (what
//                                          `memtrace summary` lists at the peak), each device at its own peak
// A sample per (folded stack, device, phase), its six values summed over the allocations that have them. Labels:
// "device" ("cuda:0", "unknown device" for -1) and, where the job's iterations were found (analysis/phases.h),
// "phase" (phase_name of the allocating event: "forward", "backward", "optimizer", "other", "outside iterations").
// Stacks: stacks/folded_stack.h's fold_stack, one Location per frame label, leaf first in Sample.location_id; a
// Function per label (name the label, no system_name, filename the frame's file, start_line 0: the trace has the
// line that ran, not the function's first), the Location's Line the frame's line (0 where unknown).
// Memory: the replay's (live allocations) plus a few values per (stack, device, phase) and the folded stacks.
#pragma once

#include <ostream>

#include "export/export_source.h"

namespace memtrace {

// Writes the gzip'ed profile to `out`. Reads the trace once more (and, through source.phases(), once more for the
// iterations where not yet done). Throws TraceError where the trace no longer reads.
void write_pprof(const ExportSource& source, std::ostream& out);

}  // namespace memtrace
