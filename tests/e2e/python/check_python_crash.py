"""A Python job with faulthandler that dies of SIGSEGV: the same death traced and untraced, faulthandler's
report still printed (its handler ran), and the trace ends with TraceEnd{SIGNAL, 11, events 3}.

python_crash.py: 3 events (alloc 4 MiB, alloc 8 MiB, free 4 MiB), then ctypes.string_at(0).
faulthandler writes "Fatal Python error: Segmentation fault" and the traceback naming python_crash.py at
the marked line, then re-raises: killed by signal 11 both times.
"""
import e2e_lib
import faults_lib

case = e2e_lib.Case()
script = case.source("python_crash.py")
line = e2e_lib.marker_line(script, "the crash: line marked for the checker")
argv = [case.args.python, script]
_, untraced = faults_lib.run(argv, faults_lib.untraced_env(case), timeout=30, cwd=faults_lib.work_dir(case))
_, traced = faults_lib.run(argv, faults_lib.traced_env(case), timeout=30, cwd=faults_lib.work_dir(case))
faults_lib.echo(untraced, "untraced")
faults_lib.echo(traced, "traced")
case.check("untraced killed by", 11, untraced.signal)
case.check("traced killed by", 11, traced.signal)
for label, outcome in (("untraced", untraced), ("traced", traced)):
    case.check(f"{label}: faulthandler's report", True, "Fatal Python error: Segmentation fault" in outcome.stderr)
    case.check(f"{label}: traceback names the crashing line", True, f'python_crash.py", line {line}' in outcome.stderr)
trace = faults_lib.only_trace(case)
case.check("events", ["alloc 4 MiB", "alloc 8 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
case.check("TraceEnd records (how, signal, events)", [("SIGNAL", 11, 3)],
           [(e["how"], e["signal"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
case.finish()
