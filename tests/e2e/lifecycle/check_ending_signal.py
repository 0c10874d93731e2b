"""A signal whose default action ends the process (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGXCPU, SIGXFSZ,
SIGALRM, SIGUSR1, SIGUSR2), sent by the program to itself, by the checker from outside (as timeout, Slurm or
Kubernetes do) or by the kernel, with no program handler or with one installed before or after tracing started.

e2e_ending_signal records alloc 1 MiB x 10, alloc 2 MiB x 5 (15 events), then gets the signal. The flush
interval (MEMTRACE_FLUSH_MS = 600000, ten minutes) is far longer than the run, so no event reaches the file but
through the signal path: without it the trace would hold no event and no TraceEnd.

The same program is first run untraced; the traced run must end the same way: same signal, same core-dump bit
(RLIMIT_CORE = 1 MiB in both: SIGQUIT, SIGXCPU and SIGXFSZ dump core by default), same handler output.
  handler none: killed by the signal; the trace holds the 15 events and exactly one TraceEnd{SIGNAL, N, 15},
    its last record.
  handler before/after: the handler runs once ("handler N" in the marker file), the program allocates and frees
    16 MiB and returns 0: exit status 0, 17 events, one TraceEnd{EXIT, 0, 17}: a signal the program handles does
    not end its trace.
"""
import os
import shutil
import signal

import e2e_lib
import faults_lib
import signals_lib

SIGNALS = {"term": signal.SIGTERM, "int": signal.SIGINT, "hup": signal.SIGHUP, "quit": signal.SIGQUIT,
           "pipe": signal.SIGPIPE, "xcpu": signal.SIGXCPU, "xfsz": signal.SIGXFSZ, "alrm": signal.SIGALRM,
           "usr1": signal.SIGUSR1, "usr2": signal.SIGUSR2}


def add_arguments(parser):
    parser.add_argument("--signal", choices=sorted(SIGNALS), required=True)
    parser.add_argument("--send", choices=["self", "external", "kernel"], required=True)
    parser.add_argument("--handler", choices=["none", "before", "after"], required=True)


case = e2e_lib.Case(add_arguments)
number = int(SIGNALS[case.args.signal])
work = faults_lib.work_dir(case)
FLUSH = {"MEMTRACE_FLUSH_MS": "600000"}


def end_by_signal(label, env):
    cwd = os.path.join(work, label)
    os.makedirs(cwd)
    marker = os.path.join(work, f"marker-{label}")
    ready = os.path.join(work, f"ready-{label}")
    argv = [case.program("ending_signal"), str(number), case.args.send, case.args.handler, marker, ready]
    # Python ignores SIGPIPE and subprocess gives the child SIG_DFL back; the checker's own SIGINT handler is
    # not inherited (exec resets it). So the program starts with every signal at SIG_DFL, as from a shell.
    core = faults_lib.with_core_limit(1 << 20)
    if case.args.send == "external":
        outcome = signals_lib.run_and_signal(argv, env, ready, number, timeout=30, cwd=cwd, preexec_fn=core)
    else:
        _, outcome = faults_lib.run(argv, env, timeout=30, cwd=cwd, preexec_fn=core)
    faults_lib.echo(outcome, f"{label} run")
    handler_lines = open(marker).read().splitlines() if os.path.exists(marker) else []
    shutil.rmtree(cwd)  # the core dump, if any
    return outcome, handler_lines


untraced, untraced_handler = end_by_signal("untraced", faults_lib.untraced_env(case, FLUSH))
traced, traced_handler = end_by_signal("traced", faults_lib.traced_env(case, FLUSH))

handled = case.args.handler != "none"
expected_handler = [f"handler {number}"] if handled else []
events = ["alloc 1 MiB"] * 10 + ["alloc 2 MiB"] * 5
if handled:
    case.check("untraced run exit status", 0, untraced.exit_status)
    case.check("traced run exit status", 0, traced.exit_status)
    case.check("traced program went on", True, "handled" in traced.stdout.splitlines())
    events += ["alloc 16 MiB", "free 16 MiB"]
    end = ("EXIT", 0, 17)
else:
    case.check("untraced run killed by", number, untraced.signal)
    case.check("traced run killed by (same as untraced)", untraced.signal, traced.signal)
    case.check("traced core dumped (same as untraced)", untraced.core_dumped, traced.core_dumped)
    case.check("traced program never went on", False, "still alive" in traced.stdout)
    end = ("SIGNAL", number, 15)
case.check("untraced handler output", expected_handler, untraced_handler)
case.check("traced handler output", expected_handler, traced_handler)

trace = faults_lib.only_trace(case)
faults_lib.check_trace_ends_with(case, trace, events, end)
case.finish()
