"""An allocation from a static constructor, before main(), is recorded with a stack naming the constructor.

e2e_static_ctor: alloc 4 MiB from EarlyAllocation's constructor (via allocate_before_main, kept), then in
main alloc 8 MiB, free 8 MiB: 3 events, TraceEnd{EXIT}. The only leak is the 4 MiB = 4194304-byte block;
its frames name allocate_before_main at the marked line of static_ctor.cc and EarlyAllocation's constructor.
"""
import e2e_lib
import faults_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, outcome = faults_lib.run([case.program("static_ctor")], faults_lib.traced_env(case), timeout=30)
faults_lib.echo(outcome, "e2e_static_ctor")
case.check("exit status", 0, outcome.exit_status)
trace = faults_lib.only_trace(case)
case.check("events", ["alloc 4 MiB", "alloc 8 MiB", "free 8 MiB"], faults_lib.describe_events(trace))
case.check("first event has a stack", True, bool(trace.events()) and trace.events()[0]["stack_id"] != 0)
case.check("TraceEnd records (how, events)", [("EXIT", 3)], [(e["how"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
leaks = case.analyze("leaks", trace.path).get("leaks", [])
case.check("leak sites", 1, len(leaks))
frames = leaks[0]["frames"] if leaks else []
case.check("leaks[0].bytes", 4 * MIB, leaks[0]["bytes"] if leaks else None)
line = e2e_lib.marker_line(case.source("static_ctor.cc"), "the static constructor's allocation")
case.check(f"frames have allocate_before_main at static_ctor.cc:{line}", True,
           e2e_lib.has_frame(frames, "static_ctor.cc", line, "allocate_before_main"))
case.check("frames have EarlyAllocation's constructor", True,
           e2e_lib.has_frame(frames, "static_ctor.cc", None, "EarlyAllocation::EarlyAllocation"))
case.finish()
