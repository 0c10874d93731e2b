"""A fatal signal after 3 CUDA events, with no program handler, one installed before the first CUDA call
(before tracing starts) or one installed after it (while tracing); installed with sigaction() and
sa_handler, with signal() (-signal), or with sigaction() and SA_SIGINFO (-siginfo).

e2e_crash records alloc 4 MiB, alloc 8 MiB, free 4 MiB (3 events), then crashes (segv: a null store;
bus: a store into a file mapping past the file's end; abrt: abort(); fpe: integer division by zero;
ill: a trap instruction). Its handler writes "handler N" to a marker file once and restores the default
action, so the process still dies by signal N. The SA_SIGINFO handler writes "handler N siginfo ok"
when its siginfo_t says si_signo = N (a chained call must pass the kernel's siginfo on).

The same program is first run without the tracer; the traced run must end the same way: same signal,
same core-dump bit (RLIMIT_CORE = 1 MiB in both, so a core is dumped whenever the signal's default action
dumps one), same handler output, and the program must see its own handler when it asks sigaction().
The trace: the 3 events, then exactly one TraceEnd{how: SIGNAL, signal: N, events: 3} as its last record,
in whole frames.

Handlers that keep the process from dying by the signal:
  after-exit: the handler calls _exit(3): exit status 3 traced and untraced, one TraceEnd, how SIGNAL
    (the signal was already being handed on when the handler exited), events 3.
  after-recover: the handler siglongjmp()s back; the program allocates 16 MiB, frees it, returns 0:
    exit status 0 traced and untraced, all 5 events (alloc 4, alloc 8, free 4, alloc 16, free 16 MiB)
    and one TraceEnd{how: EXIT, events: 5}: a signal the program survives does not end its trace.
"""
import os
import shutil
import signal

import e2e_lib
import faults_lib

SIGNALS = {"segv": signal.SIGSEGV, "bus": signal.SIGBUS, "abrt": signal.SIGABRT, "fpe": signal.SIGFPE,
           "ill": signal.SIGILL}


def add_arguments(parser):
    parser.add_argument("--signal", choices=sorted(SIGNALS), required=True)
    parser.add_argument("--handler", required=True, choices=[
        "none", "before", "after", "before-signal", "after-signal", "before-siginfo", "after-siginfo",
        "after-exit", "after-recover"])


case = e2e_lib.Case(add_arguments)
number = int(SIGNALS[case.args.signal])
work = faults_lib.work_dir(case)


def crash(label, env):
    cwd = os.path.join(work, label)
    os.makedirs(cwd)
    marker = os.path.join(work, f"marker-{label}")
    _, outcome = faults_lib.run([case.program("crash"), case.args.signal, case.args.handler, marker], env,
                                timeout=30, cwd=cwd, preexec_fn=faults_lib.with_core_limit(1 << 20))
    faults_lib.echo(outcome, f"{label} run")
    handler_lines = open(marker).read().splitlines() if os.path.exists(marker) else []
    shutil.rmtree(cwd)  # the core dump, if any
    return outcome, handler_lines


untraced, untraced_handler = crash("untraced", faults_lib.untraced_env(case))
traced, traced_handler = crash("traced", faults_lib.traced_env(case))

siginfo = " siginfo ok" if case.args.handler.endswith("-siginfo") else ""
expected_handler = [] if case.args.handler == "none" else [f"handler {number}{siginfo}"]
expected_query = "query: default" if case.args.handler == "none" else "query: own handler"
survives = case.args.handler in ("after-exit", "after-recover")
if survives:
    status = 3 if case.args.handler == "after-exit" else 0
    case.check("untraced run exit status", status, untraced.exit_status)
    case.check("traced run exit status", status, traced.exit_status)
else:
    case.check("untraced run killed by", number, untraced.signal)
    case.check("traced run killed by (same as untraced)", untraced.signal, traced.signal)
    case.check("traced core dumped (same as untraced)", untraced.core_dumped, traced.core_dumped)
case.check("untraced handler output", expected_handler, untraced_handler)
case.check("traced handler output", expected_handler, traced_handler)
case.check("traced program's sigaction() query", True, expected_query in traced.stdout.splitlines())
case.check("traced program never went on", False, "still alive" in traced.stdout)

trace = faults_lib.only_trace(case)
events = ["alloc 4 MiB", "alloc 8 MiB", "free 4 MiB"]
end = ("SIGNAL", number, 3)
if case.args.handler == "after-recover":
    case.check("traced program recovered", True, "recovered" in traced.stdout.splitlines())
    events += ["alloc 16 MiB", "free 16 MiB"]
    end = ("EXIT", 0, 5)
faults_lib.check_trace_ends_with(case, trace, events, end)
case.finish()
