// `memtrace export --format speedscope`: a speedscope file (https://www.speedscope.app/file-format-schema.json,
// checked against the schema the pinned `speedscope` npm package ships; docs/commands/export.md, speedscope) of
// "sampled" profiles whose weights are bytes (unit "bytes"), one sample per distinct stack:
//   - per device, in ascending order of ordinal, two profiles:
//       "device N: live at peak allocated (T s)": what was live of the allocated kind at the device's peak
//           allocated (the call sites of `memtrace summary`'s live at peak);
//       "device N: live at exit (leak candidates)": the leak candidates live at exit (`memtrace leaks`: at the
//           first PYTHON_FINALIZING, else at the end);
//   - then "all devices: every allocation (alloc_space)": the bytes of every successful allocation of the
//     allocated kind over the whole trace, freed or not (pprof's alloc_space). Graph memory nodes made live by
//     a graph launch are not ALLOC events and are not counted there.
// A device has its two profiles where it has a peak allocated or leak candidates. Stacks are
// stacks/folded_stack.h's fold_stack, root first as speedscope's samples are, with one shared frame table
// (name: the folded label; file and line where known). Samples: largest first; stacks of 0 bytes left out.
#pragma once

#include <ostream>

#include "export/export_source.h"

namespace memtrace {

// Writes the file described above, compact JSON and a newline. Reads the trace once more, streaming, for the
// alloc_space profile: memory is the live allocations and the stacks, not the events. Throws TraceError where the
// trace no longer reads.
void write_speedscope(const ExportSource& source, std::ostream& out);

}  // namespace memtrace
