// The trace as JSON lines (`memtrace dump`, in the style of `memray parse`): every record of the file, in file
// order, as one JSON object per line, for scripts and tests that want the records themselves rather than a report.
// Each object has "record", the kind's name in proto/memtrace.proto's Record (start, module, python_frame, stack,
// event, thread, notice, end, device, range_name, range_event; "unknown" for a kind this reader does not know), and the record's fields by their
// proto names, enums by their value names:
//   start         pid, ppid, hostname, argv, start_monotonic_ns, start_unix_ns, tracer_version, flush_interval_ms,
//                 python_frames, job_id, job_id_source, and max_native_frames, max_native_frames_python, rank,
//                 local_rank, world_size where the trace has them
//   module        path, load_address, start, end, build_id (lower-case hex, "" for none)
//   python_frame  id, file, function, line
//   stack         id, frames (Python frame ids with bit 63 set, as in the file), native_frames_cut, python_frames_cut,
//                 and python_frames_from_backward only when true
//   event         kind, layer, api, memory, tid, device, stream, address, size, result, stack_id, handle, graph,
//                 capture_id, device_free_bytes, device_total_bytes, context, and process_used_bytes,
//                 other_processes_used_bytes where the event has them; the sticky fields and allocator totals as
//                 the reader fills them in (read/trace_reader.h). Plus "has_stack": whether a Stack record of the
//                 file has its stack_id, and with `frames`, for an event with a stack, "native_frames" and
//                 "python_frames" (how many of each the Stack holds) and "native_frames_cut", "python_frames_cut"
//                 (and "python_frames_from_backward" only when true)
//   thread        tid, name
//   notice        code, message, count
//   end           events, dropped_events, time_delta_ns, how, signal
//   device        ordinal, uuid (lower-case hex), name, total_bytes
//   range_name    id, name
//   range_event   kind (PUSH, POP, START, END, MARK; "" for a kind newer than this reader), name_id, tid,
//                 time_us, range_id
// Text from the trace (host name, argv, paths, names, messages) is valid UTF-8 (the reader repairs it) and written
// with the characters a terminal acts on escaped (util/terminal_text.h: json_terminal_safe), so that a hostile
// trace shown with `cat` cannot drive the terminal; every line parses as JSON.
#pragma once

#include <ostream>
#include <string>

#include "read/trace_reader.h"

namespace memtrace {

struct DumpOptions {
  bool frames = false;  // each event with a stack: how many native and Python frames it holds, and the cut flags
};

// Writes every record of the trace at `path` to `out`, one line each. Reads the file twice: first for the Stack
// records (an event's has_stack may name a Stack written after it), then to write; memory grows with the number of
// stacks, not of events. Returns the second read's summary (truncated: the lines end at the last complete chunk).
// Throws TraceError as read_trace does: from the first read before anything is written, from the second (the file
// changed between the reads) after the lines of the records before the damage.
TraceReadSummary dump_records(const std::string& path, const DumpOptions& options, std::ostream& out);

}  // namespace memtrace
