// `memtrace export --format csv`: every event of the trace as one CSV row, in file order, for ad-hoc analysis
// (pandas, DuckDB, a spreadsheet). Columns:
//   event        the event's index among the trace's events, from 0 (as the other reports count them)
//   time_ns      nanoseconds since the trace started (the sum of the events' time deltas, as the replay keeps it)
//   kind, layer, api, memory   proto/memtrace.proto's value names (ALLOC, LAYER_DRIVER, CUDA_MALLOC, MEMORY_DEVICE)
//   device, stream, tid        as recorded (device -1: unknown)
//   address      lower-case hex with 0x
//   size_bytes, result, stack_id, handle
// The enum names are protobuf's identifiers (letters, digits, '_'): no cell needs quoting.
#pragma once

#include <ostream>

#include "export/export_source.h"

namespace memtrace {

// Writes the header line and one row per event. Reads the trace once more, streaming (memory stays flat).
// Throws TraceError where it no longer reads.
void write_event_csv(const ExportSource& source, std::ostream& out);

}  // namespace memtrace
