"""Python's os._exit (no atexit handlers, no interpreter finalization) loses nothing.

os_exit.py records cudaMalloc 4 MiB, cudaMalloc 8 MiB, cudaFree of the 4 MiB (3 events), then
os._exit(6): exit status 6, TraceEnd{how: UNDERSCORE_EXIT, events: 3}.
"""
import e2e_lib
import faults_lib

case = e2e_lib.Case()
_, outcome = faults_lib.run([case.args.python, case.source("os_exit.py")], faults_lib.traced_env(case), timeout=30)
faults_lib.echo(outcome, "os_exit.py")
case.check("exit status", 6, outcome.exit_status)
trace = faults_lib.only_trace(case)
case.check("file ends on a frame boundary", True, trace.complete)
case.check("events", ["alloc 4 MiB", "alloc 8 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
case.check("TraceEnd records (how, events)", [("UNDERSCORE_EXIT", 3)],
           [(e["how"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
case.finish()
