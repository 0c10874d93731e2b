"""Ends without atexit handlers (_exit, _Exit) or by returning from main: nothing recorded is lost.

e2e_exit_paths records alloc 4 MiB, alloc 8 MiB, free 4 MiB (3 events), then:
  _exit(7)  -> exit status 7, TraceEnd{how: UNDERSCORE_EXIT, events: 3}
  _Exit(9)  -> exit status 9, TraceEnd{how: UNDERSCORE_EXIT, events: 3}
  return 5  -> exit status 5, TraceEnd{how: EXIT, events: 3}
"""
import e2e_lib
import faults_lib

EXPECTED = {"_exit": (7, "UNDERSCORE_EXIT"), "_Exit": (9, "UNDERSCORE_EXIT"), "return": (5, "EXIT")}


def add_arguments(parser):
    parser.add_argument("--how", choices=sorted(EXPECTED), required=True)


case = e2e_lib.Case(add_arguments)
status, how = EXPECTED[case.args.how]
_, outcome = faults_lib.run([case.program("exit_paths"), case.args.how], faults_lib.traced_env(case), timeout=30)
faults_lib.echo(outcome, "e2e_exit_paths")
case.check("exit status", status, outcome.exit_status)
trace = faults_lib.only_trace(case)
case.check("file ends on a frame boundary", True, trace.complete)
case.check("events", ["alloc 4 MiB", "alloc 8 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
case.check("TraceEnd records (how, events)", [(how, 3)], [(e["how"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
summary = case.analyze("summary", trace.path)
case.check("analyzer trace.end.how", how, (summary.get("trace", {}).get("end") or {}).get("how"))
case.finish()
