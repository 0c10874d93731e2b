"""MEMTRACE_FULL_BUFFER=wait: an event that finds both buffers full waits for the writer, nothing is lost.

As in check_dropped_events.py, the writer thread is held still (ptrace) while e2e_flood records
2 x 50000 = 100000 events with MEMTRACE_BUFFER_MB=1 (about 45 bytes each: 4.5 MB, more than the two
1 MiB buffers). With the wait policy the loop cannot finish while the writer is stopped: 2 s later its
"done" file is still missing. Once the writer is let go, the loop finishes and the program exits.
Events made: 1 (alloc 4 MiB) + 100000 + 1 (free 4 MiB) = 100002, all of them in the file:
  - exit status 0; TraceEnd{EXIT, events 100002, dropped_events 0}; no EVENTS_DROPPED notice;
  - the first event is the 4 MiB allocation and the last its free.
"""
import os
import signal
import time

import e2e_lib
import faults_lib
from faults_lib import PTRACE_DETACH, ptrace, trace_file

PAIRS = 50000

case = e2e_lib.Case()
work = faults_lib.work_dir(case)
env = faults_lib.traced_env(case, {"MEMTRACE_BUFFER_MB": "1", "MEMTRACE_FLUSH_MS": "1000",
                                   "MEMTRACE_FULL_BUFFER": "wait"})
proc, tid = faults_lib.start_flood_with_writer_stopped(case, work, PAIRS, env)
open(os.path.join(work, "go"), "w").close()
time.sleep(2)
case.check("loop still waiting for the stopped writer after 2 s", False,
           os.path.exists(os.path.join(work, "done")))
ptrace(PTRACE_DETACH, tid)
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(work, "done")):
    if time.monotonic() > deadline:
        os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit("FAIL: e2e_flood did not finish its loop after the writer was let go")
    time.sleep(0.05)
open(os.path.join(work, "finish"), "w").close()
status = faults_lib.wait_for_exit(proc, "e2e_flood did not exit")
case.check("exit status", 0, status)

trace = faults_lib.only_trace(case)
events = faults_lib.describe_events(trace)
ends = trace.ends()
end = ends[0] if len(ends) == 1 else {}
case.check("TraceEnd.how", "EXIT", end.get("how"))
case.check("events in the file", 2 * PAIRS + 2, len(events))
case.check("TraceEnd.events", 2 * PAIRS + 2, end.get("events"))
case.check("TraceEnd.dropped_events", 0, end.get("dropped_events", 0))
case.check("EVENTS_DROPPED notices", 0, len(trace.notices(trace_file.NOTICE_EVENTS_DROPPED)))
case.check("first event", "alloc 4 MiB", events[0] if events else None)
case.check("last event", "free 4 MiB", events[-1] if events else None)
case.finish()
