"""SIGABRT sent to a thread that is allocating (possibly inside the tracer, holding its lock) while three
other threads allocate too: the process dies by SIGABRT, never hangs, ten times in a row.

e2e_crash_async: four threads loop on (alloc 1 MiB, free); once each did 1000 pairs, pthread_kill(thread
0, SIGABRT). Untraced, it dies by signal 6. Traced, each of 10 runs must die by signal 6 within 30 s (a
tracer whose crash handler waits for a lock the interrupted thread holds would hang it), and its file must
hold whole records: one TraceEnd{how: SIGNAL, signal: 6} whose `events` is the number of events in the
file, at least 4 x 1000 x 2 = 8000 of them (every pair completed before the signal was sent).
"""
import os

import e2e_lib
import faults_lib

RUNS = 10
case = e2e_lib.Case()
_, untraced = faults_lib.run([case.program("crash_async")], faults_lib.untraced_env(case), timeout=30)
case.check("untraced run killed by", 6, untraced.signal)
for run in range(RUNS):
    output = os.path.join(case.args.out_dir, f"run{run}.mtrace")
    _, outcome = faults_lib.run([case.program("crash_async")], faults_lib.traced_env(case, {"MEMTRACE_OUTPUT": output}),
                                timeout=30, cwd=faults_lib.work_dir(case))
    case.check(f"run {run}: killed by", 6, outcome.signal)
    if not os.path.exists(output):
        case.check(f"run {run}: trace written", True, False)
        continue
    trace = faults_lib.trace_file.TraceFile(output)
    events = len(trace.events())
    case.check(f"run {run}: TraceEnd records (how, signal, events)", [("SIGNAL", 6, events)],
               [(e["how"], e["signal"], e["events"]) for e in trace.ends()])
    case.check(f"run {run}: at least 8000 events", True, events >= 8000)
case.finish()
