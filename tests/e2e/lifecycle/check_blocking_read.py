"""A blocking read() across a SIGHUP behaves as untraced: with SIGHUP ignored (inherited at exec, as under nohup)
the process survives and the read is not interrupted; with a program handler the read restarts when the handler
was installed with SA_RESTART and fails with EINTR when it was not (the tracer's handler, in front of the
program's in the kernel, must carry the program's flags).

e2e_blocking_read MODE: alloc 4 MiB, then a read() on a pipe during which its child sends SIGHUP (and a SIGUSR1
probe), then writes "x"; free 4 MiB; exit 0. Expected, the same untraced and traced:
  ignored:              query: ignored,     read: x,     no handler line;
  restart-before/after: query: own handler, read: x,     "handler 1" once;
  norestart-after:      query: own handler, read: EINTR, "handler 1" once;
  ignored-then-handler: query: own handler, read: EINTR, "handler 1" once (started ignored; the handler, without
                        SA_RESTART, installed while tracing runs: the tracer's handler goes in front then);
  siginterrupt-signal-after: query: own handler, read: EINTR, "handler 1" once (siginterrupt(SIGHUP, 1), then
                        signal(): no SA_RESTART, as glibc's signal() gives a signal named by siginterrupt).
Every run: exit status 0, "child exit status 0"; the trace: alloc 4 MiB, free 4 MiB, one TraceEnd{EXIT, 0, 2}.
"""
import os
import signal

import e2e_lib
import faults_lib
import signals_lib

EXPECTED = {
    "ignored": ("ignored", "x", []),
    "restart-before": ("own handler", "x", ["handler 1"]),
    "restart-after": ("own handler", "x", ["handler 1"]),
    "norestart-after": ("own handler", "EINTR", ["handler 1"]),
    "ignored-then-handler": ("own handler", "EINTR", ["handler 1"]),
    "siginterrupt-signal-after": ("own handler", "EINTR", ["handler 1"]),
}


def add_arguments(parser):
    parser.add_argument("--mode", choices=sorted(EXPECTED), required=True)


case = e2e_lib.Case(add_arguments)
work = faults_lib.work_dir(case)
query, read, handler_lines = EXPECTED[case.args.mode]
start_ignored = case.args.mode.startswith("ignored")


def run(label, env):
    marker = os.path.join(work, f"marker-{label}")
    preexec = signals_lib.ignoring(signal.SIGHUP) if start_ignored else None
    _, outcome = faults_lib.run([case.program("blocking_read"), case.args.mode, marker], env, timeout=60,
                                preexec_fn=preexec)
    faults_lib.echo(outcome, f"{label} run")
    lines = open(marker).read().splitlines() if os.path.exists(marker) else []
    return outcome, lines


for label, env in (("untraced", faults_lib.untraced_env(case)), ("traced", faults_lib.traced_env(case))):
    outcome, lines = run(label, env)
    stdout = outcome.stdout.splitlines()
    case.check(f"{label}: exit status", 0, outcome.exit_status)
    case.check(f"{label}: sigaction() query", [f"query: {query}"], [l for l in stdout if l.startswith("query: ")])
    case.check(f"{label}: read", [f"read: {read}"], [l for l in stdout if l.startswith("read: ")])
    case.check(f"{label}: child exit status 0", True, "child exit status 0" in stdout)
    case.check(f"{label}: handler output", handler_lines, lines)

trace = faults_lib.only_trace(case)
case.check("events", ["alloc 4 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
case.check("TraceEnd records (how, signal, events)", [("EXIT", 0, 2)],
           [(e["how"], e["signal"], e["events"]) for e in trace.ends()])
case.finish()
