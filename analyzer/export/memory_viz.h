// `memtrace export --format memory-viz`: the trace as the snapshot torch.cuda.memory._snapshot() returns, for
// PyTorch's memory_viz page (pytorch.org/memory_viz: Active Memory Timeline, Allocator State History) and
// `python -m torch.cuda._memory_viz` (stats, trace_plot, segment_plot...). docs/commands/export.md says what each
// field holds; in short, a dict:
//   device_traces  per device ordinal, a list of trace entries in event order: alloc / free_requested +
//                  free_completed for each PyTorch block, segment_alloc / segment_free for each driver allocation of
//                  device memory (cudaMalloc, cuMemAlloc... PyTorch's segments and everyone else's), segment_map /
//                  segment_unmap for each cuMemMap of device memory, segment_alloc / segment_free for each
//                  stream-ordered pool block (cudaMallocAsync), oom for each failed allocation; with addr, size,
//                  stream, time_us (microseconds since the Unix epoch) and frames (innermost first);
//   segments       the segments live at the end (at the first PYTHON_FINALIZING event where the job ran Python,
//                  else at the end of the trace), each with blocks that tile it in address order: the live PyTorch
//                  blocks (active_allocated) and the gaps between them (inactive);
//   memtrace       what was left out to keep the two consistent (counts), and where the snapshot ends.
// The two are kept consistent the way the page replays them (backwards from `segments`, through device_traces):
// every block lies inside a segment live for all of its life, no two live blocks or segments overlap, and each
// free, unmap and segment free refers to what is live. Events of a damaged trace that would break this are left
// out and counted: a block outside every segment, a free of a block or segment not live, a segment overlapping a
// live one; a block still live when its segment is freed or unmapped gets a free entry first.
//
// Memory: the live segments and blocks (every device's, until `segments` is written), one memory model while a
// device's entries are written, and each stack's frames, resolved once (written once and referred to after in the
// pickle; the JSON repeats them). The trace is read once per device that allocated (a process normally uses one to
// eight; a trace names at most 1,024 ordinals, model/memory_model.h).
#pragma once

#include <ostream>

#include "export/export_source.h"

namespace memtrace {

// Writes the snapshot as a Python pickle (export/pickle_writer.h), or as JSON when the export's file name ends in
// ".json" (ExportSource::output_path). Throws TraceError where the trace no longer reads.
void write_memory_viz(const ExportSource& source, std::ostream& out);

// The same, with the encoding chosen by the caller: `json` true for JSON, false for the pickle.
void write_memory_viz_as(const ExportSource& source, std::ostream& out, bool json);

}  // namespace memtrace
