"""fork() while four other threads allocate: no deadlock (the run has a deadline), exact counts.

e2e_fork_threads 2000 20: four threads each do 2000 x (alloc 1 MiB, free) while the main thread forks 20
children in turn, each doing alloc 2 MiB, free, exit(0).
  parent's file: 4 x 2000 x 2 = 16000 events, 4 distinct thread ids, none of them the main thread's;
                 TraceEnd{EXIT, events 16000}, no dropped events (MEMTRACE_BUFFER_MB=64 leaves room)
  each child's file: ["alloc 2 MiB", "free 2 MiB"], TraceEnd{EXIT, events 2}, TraceStart.ppid = parent
  21 files in all.
"""
import os

import e2e_lib
import faults_lib

PAIRS, CHILDREN = 2000, 20

case = e2e_lib.Case()
proc, outcome = faults_lib.run([case.program("fork_threads"), str(PAIRS), str(CHILDREN)],
                               faults_lib.traced_env(case, {"MEMTRACE_BUFFER_MB": "64"}), timeout=100)
faults_lib.echo(outcome, "e2e_fork_threads")
case.check("exit status", 0, outcome.exit_status)
parent = proc.pid
paths = faults_lib.trace_paths(case)
case.check("number of trace files", 1 + CHILDREN, len(paths))
children_ok = 0
for path in paths:
    trace = faults_lib.trace_file.TraceFile(path)
    if trace.pid() == parent:
        events = trace.events()
        case.check("parent: events", 4 * PAIRS * 2, len(events))
        case.check("parent: allocations of 1 MiB", 4 * PAIRS,
                   sum(1 for e in events if e["kind"] == faults_lib.trace_file.ALLOC and e["size"] == 1 << 20))
        tids = {e["tid"] for e in events}
        case.check("parent: distinct thread ids", 4, len(tids))
        case.check("parent: main thread recorded nothing", False, parent in tids)
        case.check("parent: TraceEnd records (how, events, dropped)", [("EXIT", 4 * PAIRS * 2, 0)],
                   [(e["how"], e["events"], e["dropped_events"]) for e in trace.ends()])
    else:
        good = (trace.ppid() == parent and faults_lib.describe_events(trace) == ["alloc 2 MiB", "free 2 MiB"]
                and [(e["how"], e["events"]) for e in trace.ends()] == [("EXIT", 2)])
        if not good:
            print(f"{path}: ppid {trace.ppid()}, events {faults_lib.describe_events(trace)}, ends {trace.ends()}")
        children_ok += good
case.check("children's files with exactly their 2 events and TraceEnd{EXIT}", CHILDREN, children_ok)
case.finish()
