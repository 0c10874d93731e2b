// `memtrace export --format perfetto`: the trace as a native Perfetto trace (protobuf TracePackets, the subset in
// export/perfetto_trace.proto), which ui.perfetto.dev and trace_processor open (docs/commands/export.md, "perfetto").
// One process track, named by the traced command and pid, and under it:
//   - counter tracks in bytes per device ("cuda:0 allocated", "cuda:0 reserved", "cuda:0 driver": the three totals of
//     the text reports, model/memory_model.h DeviceTotals), and where the trace has DEVICE_USAGE samples "cuda:0
//     device used" (total minus free) and "cuda:0 other processes" (NVML's figure, where present);
//   - "cuda:0 OOMs": an instant per failed allocation the reports list (MemoryModel::ooms), with its request;
//   - "iterations": a slice per iteration of the job (analysis/phases.h), its phases as slices nested in it;
//   - "NVTX thread TID": the job's NVTX ranges of that thread as nested slices (a range that overlaps another without
//     nesting goes to a further track of the thread, "NVTX thread TID (2)", and so on).
// Times are nanoseconds since the trace's start (the first CUDA call), negative ones shown at 0.
// Many traces (PerfettoJobWriter: a job's ranks, its workers) are one trace of many processes, each with the tracks
// above, named "rank N / ARGV0 / HOST" (the parts its TraceStart has), the uuids of process k from k * 2^32 + 1,
// and all on one wall-clock timeline: a process's times are its start's CLOCK_REALTIME (TraceStart.start_unix_ns)
// plus its times since its start, in ns since the Unix epoch (a trace without start_unix_ns keeps its own times).
// Counter values: one per change of the value. A trace of more than max_exact_events events is thinned without
// losing a peak: its duration is cut into `thinning_intervals` equal intervals and each counter track gets, per
// interval where it changed, the lowest and the highest value it took there and the value it ended the interval
// with, each at the moment it was reached, in time order (and again only where the value changes).
// Memory: the replay's (live allocations), the NVTX ranges and iterations the analysis holds, and a few values per
// track; counter values are written as the replay goes.
#pragma once

#include <cstdint>
#include <ostream>

#include "export/export_source.h"

namespace memtrace {

struct PerfettoOptions {
  uint64_t max_exact_events = 1'000'000;  // up to this many events: one counter value per change
  uint64_t thinning_intervals = 100'000;  // beyond: the duration cut into this many intervals (at least 1)
};

// Writes the trace (`Trace` message: one length-delimited field 1 per TracePacket) to `out`. Reads the trace once
// more (and, through source.phases(), once more for the iterations where not yet done). Throws TraceError where
// the trace no longer reads.
void write_perfetto(const ExportSource& source, std::ostream& out);
void write_perfetto(const ExportSource& source, std::ostream& out, const PerfettoOptions& options);

// Writes many traces to `out` as one Perfetto trace, one process each, in the order added (the header). Each add()
// reads its trace as write_perfetto does and throws TraceError where it no longer reads (the output is then
// incomplete). Holds no more than one trace's state at a time.
class PerfettoJobWriter {
 public:
  explicit PerfettoJobWriter(std::ostream& out, const PerfettoOptions& options = {});
  void add(const ExportSource& source);

 private:
  std::ostream& out_;
  PerfettoOptions options_;
  uint64_t processes_ = 0;  // added so far: the next one's index
};

}  // namespace memtrace
