"""exec: TraceEnd{EXEC} closes the first image's trace; the new image (same pid, LD_PRELOAD inherited)
writes its own, under a unique name since the expanded name is the same.

e2e_exec_chain first FUNCTION: alloc 4 MiB (1 event), then FUNCTION (execv, execve, execvp, execvpe, and
the variadic execl, execlp, execle, which glibc runs through its internal execve, not the exported one)
of itself with "second": alloc 8 MiB, free 8 MiB (2 events), exit status 0.
MEMTRACE_OUTPUT is OUT/trace-%p.mtrace (same pid for both images) or, with --fixed-name, OUT/fixed.mtrace:
  first image:  NAME.mtrace   = TraceStart.argv [program, "first", FUNCTION], ["alloc 4 MiB"],
                                TraceEnd{EXEC, events 1}
  second image: NAME.1.mtrace = TraceStart.argv [program, "second"], ["alloc 8 MiB", "free 8 MiB"],
                                TraceEnd{EXIT, events 2}
"""
import os

import e2e_lib
import faults_lib


def add_arguments(parser):
    parser.add_argument("--function", choices=["execv", "execve", "execvp", "execvpe", "execl", "execlp", "execle"], required=True)
    parser.add_argument("--fixed-name", action="store_true")


case = e2e_lib.Case(add_arguments)
out = case.args.out_dir
extra = {"MEMTRACE_OUTPUT": os.path.join(out, "fixed.mtrace")} if case.args.fixed_name else {}
program = case.program("exec_chain")
proc, outcome = faults_lib.run([program, "first", case.args.function], faults_lib.traced_env(case, extra),
                               timeout=30)
faults_lib.echo(outcome, "e2e_exec_chain")
case.check("exit status", 0, outcome.exit_status)
stem = "fixed" if case.args.fixed_name else f"trace-{proc.pid}"
case.check("trace files", [f"{stem}.1.mtrace", f"{stem}.mtrace"], sorted(os.listdir(out)))
images = [
    (f"{stem}.mtrace", "first image", [program, "first", case.args.function], ["alloc 4 MiB"], [("EXEC", 1)]),
    (f"{stem}.1.mtrace", "second image", [os.path.realpath(program), "second"], ["alloc 8 MiB", "free 8 MiB"],
     [("EXIT", 2)]),
]
for name, label, argv, events, ends in images:
    path = os.path.join(out, name)
    if not os.path.exists(path):
        continue
    trace = faults_lib.trace_file.TraceFile(path)
    case.check(f"{label}: TraceStart.pid", proc.pid, trace.pid())
    case.check(f"{label}: TraceStart.argv", argv, trace.argv())
    case.check(f"{label}: events", events, faults_lib.describe_events(trace))
    case.check(f"{label}: TraceEnd records (how, events)", ends, [(e["how"], e["events"]) for e in trace.ends()])
    case.check(f"{label}: TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
case.finish()
