"""The writer cannot keep up: events are dropped and counted, never buffered without bound, never blocking.

The checker stops the tracer's writer thread ("memtrace-writer") with ptrace while e2e_flood records
2 x 200000 = 400000 events with MEMTRACE_BUFFER_MB=1: about 45 bytes each, they need about 18 MB, far
more than the two 1 MiB buffers, and no flush can happen meanwhile. The process's resident memory may grow
by less than 8 MiB over the loop (the buffers are mapped at start; what the loop allocates is fake device
memory that is never touched). The program must still finish its
loop (a tracer that waited for room would hang it: the run has a deadline). Then the writer is let go,
and once it has written a chunk the program makes its last event.
Events made: 1 (alloc 4 MiB) + 400000 + 1 (free 4 MiB) = 400002. Expected:
  - exit status 0; TraceEnd{EXIT}; TraceEnd.events = the events in the file;
  - events in the file + TraceEnd.dropped_events = 100002, and dropped_events > 0;
  - the EVENTS_DROPPED notices add up to dropped_events;
  - the first event is the 4 MiB allocation and the last its free (recorded after the writer resumed);
  - the first Event of every chunk writes all five sticky fields (each chunk stands on its own), in at
    least the 2 chunks that hold events.
"""
import os
import signal
import time

import e2e_lib
import faults_lib
from faults_lib import trace_file

PAIRS = 200000
from faults_lib import PTRACE_DETACH, ptrace, resident_bytes


case = e2e_lib.Case()
work = faults_lib.work_dir(case)
env = faults_lib.traced_env(case, {"MEMTRACE_BUFFER_MB": "1", "MEMTRACE_FLUSH_MS": "1000"})
proc, tid = faults_lib.start_flood_with_writer_stopped(case, work, PAIRS, env)
resident_before = resident_bytes(proc.pid)
open(os.path.join(work, "go"), "w").close()
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(work, "done")):
    if time.monotonic() > deadline:
        ptrace(PTRACE_DETACH, tid)
        os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit("FAIL: e2e_flood did not finish its loop while the writer was stopped (blocked on the tracer?)")
    time.sleep(0.05)
resident_growth = resident_bytes(proc.pid) - resident_before
print(f"resident memory growth over the loop: {resident_growth} bytes")
case.check("resident memory growth below 8 MiB", True, resident_growth < 8 << 20)
trace_path = faults_lib.trace_paths(case)[0]
size_while_stopped = os.path.getsize(trace_path)
ptrace(PTRACE_DETACH, tid)
# The writer, woken while it was stopped, now writes the full buffer; only then is there room again for the
# last event.
deadline = time.monotonic() + 30
while os.path.getsize(trace_path) == size_while_stopped:
    if time.monotonic() > deadline:
        os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit("FAIL: the writer wrote nothing within 30 s of being let go")
    time.sleep(0.01)
open(os.path.join(work, "finish"), "w").close()
status = faults_lib.wait_for_exit(proc, "e2e_flood did not exit after the writer was resumed")
case.check("exit status", 0, status)

trace = faults_lib.only_trace(case)
events = faults_lib.describe_events(trace)
ends = trace.ends()
end = ends[0] if len(ends) == 1 else {}
dropped = end.get("dropped_events", 0)
print(f"events in the file: {len(events)}, dropped: {dropped}")
case.check("TraceEnd.how", "EXIT", end.get("how"))
case.check("TraceEnd.events = events in the file", len(events), end.get("events"))
case.check("events in the file + dropped", 2 * PAIRS + 2, len(events) + dropped)
case.check("some events dropped", True, dropped > 0)
case.check("EVENTS_DROPPED notices add up to dropped_events", dropped,
           sum(trace_file.first(n, trace_file.NOTICE_FIELDS["count"], 0) for n in trace.notices(trace_file.NOTICE_EVENTS_DROPPED)))
case.check("first event", "alloc 4 MiB", events[0] if events else None)
case.check("last event", "free 4 MiB", events[-1] if events else None)
# Each chunk stands on its own (proto/memtrace.proto, version 3): its first Event writes all five sticky
# fields (layer, api, tid, device, stream), zeros included, although the last 4 MiB free repeats
# most of what the flood's last recorded event had. Two chunks hold events here at least: the one the
# stopped writer let fill (its first Event, the trace's first, the 4 MiB allocation) and the one after it
# (the last event).
firsts = trace.chunk_first_events()
case.check("chunks holding events: at least 2", True, len(firsts) >= 2)
case.check("chunks whose first Event leaves out a sticky field", [],
           [i for i, e in enumerate(firsts)
            if any(trace_file.EVENT_FIELDS[name] not in e for name in ("layer", "api", "tid", "device", "stream"))])
case.finish()
