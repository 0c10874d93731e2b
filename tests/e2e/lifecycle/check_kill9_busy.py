"""kill -9 in the middle of a stream of allocations: the file reads back, the events it holds are exactly
the first events the program made, and nothing older than the flush interval is missing.

e2e_busy_loop: iteration i allocates ((i % 64) + 1) x 65536 bytes and frees it, for ever, and publishes
the number of completed iterations. The checker waits for 2000 iterations, reads the count P, waits 2 s
(40 flush intervals of MEMTRACE_FLUSH_MS = 50: the events of those P iterations were all due to be
written), then sends SIGKILL. Expected:
  - the events in the file's whole frames are the sequence's first E events, in order: event 2i is
    "alloc ((i % 64) + 1) x 64 KiB", event 2i + 1 its free (same address);
  - E >= 2P;
  - no TraceEnd;
  - `memtrace summary --json` reads the file: trace.events = E, and trace.truncated is true exactly when
    the file ends inside a frame.
"""
import os
import signal
import struct
import time

import e2e_lib
import faults_lib
from faults_lib import trace_file

case = e2e_lib.Case()
progress = os.path.join(faults_lib.work_dir(case), "progress")


def completed():
    try:
        with open(progress, "rb") as f:
            data = f.read(8)
        return struct.unpack("<Q", data)[0] if len(data) == 8 else 0
    except FileNotFoundError:
        return 0


proc, outcome = faults_lib.run([case.program("busy_loop"), progress], faults_lib.traced_env(case), timeout=60,
                               wait_until=lambda pid: completed() >= 2000)
if outcome is not None:
    faults_lib.echo(outcome, "e2e_busy_loop")
    raise SystemExit(f"FAIL: e2e_busy_loop ended on its own: {outcome.how()}")
published = completed()
time.sleep(2)
os.kill(proc.pid, signal.SIGKILL)
_, status = os.waitpid(proc.pid, 0)
proc.returncode = status
print(f"iterations published before the wait: {published}")

trace = faults_lib.only_trace(case)
events = trace.events()
print(f"events in whole frames: {len(events)}, file ends on a frame boundary: {trace.complete}")
mismatch = None
for n, e in enumerate(events):
    i = n // 2
    if n % 2 == 0:
        expected = (trace_file.ALLOC, ((i % 64) + 1) * 65536)
        measured = (e["kind"], e["size"])
    else:
        expected = (trace_file.FREE, events[n - 1]["address"])
        measured = (e["kind"], e["address"])
    if expected != measured:
        mismatch = f"event {n}: expected {expected}, measured {measured}"
        break
case.check("first event that is not the program's sequence", None, mismatch)
case.check(f"events in the file >= 2 x {published}", True, len(events) >= 2 * published)
case.check("TraceEnd records", [], trace.ends())
summary = case.analyze("summary", trace.path).get("trace", {})
case.check("analyzer trace.events", len(events), summary.get("events"))
case.check("analyzer trace.truncated", not trace.complete, summary.get("truncated"))
case.finish()
