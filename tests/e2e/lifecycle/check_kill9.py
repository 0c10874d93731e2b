"""kill -9 after the data was due to be flushed: the file reads back with every event, and no end record.

e2e_kill_wait records 4 events (alloc 4 MiB, alloc 8 MiB, alloc 16 MiB, free 8 MiB), sleeps SETTLE_MS =
500 ms (10 flush intervals of MEMTRACE_FLUSH_MS = 50) and only then creates its ready file; it records
nothing afterwards, so all 4 events were due to be written before the SIGKILL. The file must end on a
frame boundary (the writer was idle), hold the 4 events in order and no TraceEnd, and the analyzer must
read it: trace.events 4, trace.end null; device 0 holds 4 + 16 = 20 MiB = 20971520 bytes at the cut,
peak 4 + 8 + 16 = 28 MiB = 29360128.
"""
import os
import signal

import e2e_lib
import faults_lib
from e2e_lib import MIB

case = e2e_lib.Case()
ready = os.path.join(faults_lib.work_dir(case), "ready")
proc, outcome = faults_lib.run([case.program("kill_wait"), ready, str(faults_lib.SETTLE_MS)],
                               faults_lib.traced_env(case), timeout=30,
                               wait_until=lambda pid: os.path.exists(ready))
if outcome is not None:
    faults_lib.echo(outcome, "e2e_kill_wait")
    raise SystemExit(f"FAIL: e2e_kill_wait ended before it was killed: {outcome.how()}")
os.kill(proc.pid, signal.SIGKILL)
_, status = os.waitpid(proc.pid, 0)
proc.returncode = status
case.check("killed by", "SIGKILL", faults_lib.signal_name(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else None)

trace = faults_lib.only_trace(case)
case.check("file ends on a frame boundary", True, trace.complete)
case.check("events", ["alloc 4 MiB", "alloc 8 MiB", "alloc 16 MiB", "free 8 MiB"], faults_lib.describe_events(trace))
case.check("TraceEnd records", [], trace.ends())

summary = case.analyze("summary", trace.path)
case.check("analyzer trace.events", 4, summary.get("trace", {}).get("events"))
case.check("analyzer trace.end", {"how": None, "signal": 0}, summary.get("trace", {}).get("end"))
case.check_devices(summary, {0: {"peak_driver_bytes": 28 * MIB, "final_driver_bytes": 20 * MIB}})
case.finish()
