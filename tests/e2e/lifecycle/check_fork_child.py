"""fork(): the child that allocates writes its own file with only its own events; the child that never
calls CUDA writes none; the parent's file has only the parent's events.

e2e_fork_child (MiB = 1048576 bytes):
  parent: alloc A 4 MiB, [fork child 1, fork child 2, wait], alloc D 2 MiB, free A, free D -> 4 events,
          device 0 peak 4 + 2 = 6 MiB = 6291456, final 0; TraceEnd{EXIT, events 4}
  child 1: alloc B 8 MiB, alloc C 16 MiB, free B, exit(0)  -> 3 events, peak 8 + 16 = 24 MiB = 25165824,
          final 16 MiB = 16777216 (A, inherited but never allocated by the child, is not in its
          timeline); TraceStart.pid = child 1, ppid = the parent; TraceEnd{EXIT, events 3}
  child 2: exit(0) without CUDA -> no file
Every event carries the thread id of its own process's only thread (= its pid).
"""
import os
import re

import e2e_lib
import faults_lib
from e2e_lib import MIB

case = e2e_lib.Case()
proc, outcome = faults_lib.run([case.program("fork_child")], faults_lib.traced_env(case), timeout=30)
faults_lib.echo(outcome, "e2e_fork_child")
case.check("exit status", 0, outcome.exit_status)
parent = proc.pid
children = dict(re.findall(r"^(child[12]) (\d+)$", outcome.stdout, re.M))
child1 = int(children.get("child1", -1))
out = case.args.out_dir
case.check("trace files", sorted([f"trace-{parent}.mtrace", f"trace-{child1}.mtrace"]), sorted(os.listdir(out)))

expectations = [
    (parent, "parent", ["alloc 4 MiB", "alloc 2 MiB", "free 4 MiB", "free 2 MiB"], None,
     {"peak_driver_bytes": 6 * MIB, "final_driver_bytes": 0}),
    (child1, "child 1", ["alloc 8 MiB", "alloc 16 MiB", "free 8 MiB"], parent,
     {"peak_driver_bytes": 24 * MIB, "final_driver_bytes": 16 * MIB}),
]
for pid, label, events, ppid, device0 in expectations:
    path = os.path.join(out, f"trace-{pid}.mtrace")
    if not os.path.exists(path):
        continue
    trace = faults_lib.trace_file.TraceFile(path)
    case.check(f"{label}: TraceStart.pid", pid, trace.pid())
    if ppid is not None:
        case.check(f"{label}: TraceStart.ppid", ppid, trace.ppid())
    case.check(f"{label}: events", events, faults_lib.describe_events(trace))
    case.check(f"{label}: thread ids of the events", {pid}, {e["tid"] for e in trace.events()})
    case.check(f"{label}: TraceEnd records (how, events)", [("EXIT", len(events))],
               [(e["how"], e["events"]) for e in trace.ends()])
    case.check(f"{label}: TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
    case.check_devices(case.analyze("summary", path), {0: device0})
case.finish()
