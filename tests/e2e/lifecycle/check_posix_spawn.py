"""posix_spawn of a program that inherits LD_PRELOAD: the child writes its own file; the parent's is its own.

e2e_exec_chain first posix_spawn: the parent allocates 4 MiB (1 event), spawns itself as "second" and
waits; the child allocates 8 MiB and frees it (2 events) and returns 0; the parent returns 0.
  trace-PARENT.mtrace: TraceStart.pid = parent, ["alloc 4 MiB"], TraceEnd{EXIT, events 1}
  trace-CHILD.mtrace:  TraceStart.pid = child, ppid = parent, argv [program, "second"],
                       ["alloc 8 MiB", "free 8 MiB"], TraceEnd{EXIT, events 2}
"""
import os
import re

import e2e_lib
import faults_lib

case = e2e_lib.Case()
program = case.program("exec_chain")
proc, outcome = faults_lib.run([program, "first", "posix_spawn"], faults_lib.traced_env(case), timeout=30)
faults_lib.echo(outcome, "e2e_exec_chain first posix_spawn")
case.check("exit status", 0, outcome.exit_status)
match = re.search(r"^child (\d+)$", outcome.stdout, re.M)
child = int(match.group(1)) if match else -1
parent = proc.pid
case.check("trace files", sorted([f"trace-{parent}.mtrace", f"trace-{child}.mtrace"]), sorted(os.listdir(case.args.out_dir)))
for pid, label, ppid, argv, events in [
        (parent, "parent", None, [program, "first", "posix_spawn"], ["alloc 4 MiB"]),
        (child, "child", parent, [os.path.realpath(program), "second"], ["alloc 8 MiB", "free 8 MiB"])]:
    path = os.path.join(case.args.out_dir, f"trace-{pid}.mtrace")
    if not os.path.exists(path):
        continue
    trace = faults_lib.trace_file.TraceFile(path)
    case.check(f"{label}: TraceStart.pid", pid, trace.pid())
    if ppid is not None:
        case.check(f"{label}: TraceStart.ppid", ppid, trace.ppid())
    case.check(f"{label}: TraceStart.argv", argv, trace.argv())
    case.check(f"{label}: events", events, faults_lib.describe_events(trace))
    case.check(f"{label}: TraceEnd records (how, events)", [("EXIT", len(events))],
               [(e["how"], e["events"]) for e in trace.ends()])
case.finish()
