"""Ctrl-C in a Python job: python_sigint.py allocates 1 MiB six times (6 events), then sends itself SIGINT.
CPython's SIGINT handler (installed before tracing starts: the tracer chains to it) raises KeyboardInterrupt;
uncaught, CPython finalizes and re-raises SIGINT with SIG_DFL. Untraced and traced alike: killed by SIGINT (2),
"KeyboardInterrupt" on stderr, never "still alive". The flush interval (MEMTRACE_FLUSH_MS = 600000) is far longer
than the run, so the events reach the file only through the signal path: the trace holds the 6 events and exactly
one TraceEnd{SIGNAL, 2, 6}, its last record.
"""
import e2e_lib
import faults_lib

case = e2e_lib.Case()
argv = [case.args.python, case.source("python_sigint.py")]
FLUSH = {"MEMTRACE_FLUSH_MS": "600000"}
cwd = faults_lib.work_dir(case)
_, untraced = faults_lib.run(argv, faults_lib.untraced_env(case, FLUSH), timeout=60, cwd=cwd)
_, traced = faults_lib.run(argv, faults_lib.traced_env(case, FLUSH), timeout=60, cwd=cwd)
faults_lib.echo(untraced, "untraced")
faults_lib.echo(traced, "traced")
for label, outcome in (("untraced", untraced), ("traced", traced)):
    case.check(f"{label}: killed by", 2, outcome.signal)
    case.check(f"{label}: KeyboardInterrupt reported", True, "KeyboardInterrupt" in outcome.stderr)
    case.check(f"{label}: never went on", False, "still alive" in outcome.stdout)
trace = faults_lib.only_trace(case)
case.check("file ends on a frame boundary", True, trace.complete)
case.check("events", ["alloc 1 MiB"] * 6, faults_lib.describe_events(trace))
case.check("TraceEnd records (how, signal, events)", [("SIGNAL", 2, 6)],
           [(e["how"], e["signal"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
summary = case.analyze("summary", trace.path)
case.check("analyzer trace.end", {"how": "SIGNAL", "signal": 2}, summary.get("trace", {}).get("end"))
case.finish()
