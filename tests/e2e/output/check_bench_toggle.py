"""libmemtrace-bench-toggle.so: recording switched off and on inside one process (preload/measure/bench_toggle.h).

e2e_bench_toggle allocates A (1 MiB), switches recording off, allocates and frees B (2 MiB), switches it on,
allocates C (4 MiB) and frees A and C. Under the toggle library the trace holds A's and C's events only:
alloc 1 MiB, alloc 4 MiB, free 1 MiB, free 4 MiB; device 0's driver peak 1 + 4 = 5 MiB, final 0. Under
libmemtrace.so (beside it in the build) the program finds no toggle and all six events are recorded: peak
1 + 2 = 3 MiB while B is live, then 1 + 4 = 5 MiB.
"""
import os

import e2e_lib
import faults_lib
from e2e_lib import MIB

case = e2e_lib.Case()
program = [case.program("bench_toggle")]

_, outcome = faults_lib.run(program, faults_lib.traced_env(case), timeout=30)
faults_lib.echo(outcome, "e2e_bench_toggle (toggle library)")
case.check("exit status", 0, outcome.exit_status)
case.check("toggle found", True, "toggle: found" in outcome.stdout.splitlines())
trace = faults_lib.only_trace(case)
case.check("events", ["alloc 1 MiB", "alloc 4 MiB", "free 1 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
summary = case.analyze("summary", trace.path)
case.check_health(summary, 4)
case.check_devices(summary, {0: {"peak_driver_bytes": 5 * MIB, "final_driver_bytes": 0}})
os.remove(trace.path)

plain = os.path.join(os.path.dirname(case.args.preload), "libmemtrace.so")
_, outcome = faults_lib.run(program, faults_lib.traced_env(case, {"LD_PRELOAD": plain}), timeout=30)
faults_lib.echo(outcome, "e2e_bench_toggle (libmemtrace.so)")
case.check("exit status without the toggle", 0, outcome.exit_status)
case.check("toggle absent from libmemtrace.so", True, "toggle: absent" in outcome.stdout.splitlines())
trace = faults_lib.only_trace(case)
case.check("events without the toggle",
           ["alloc 1 MiB", "alloc 2 MiB", "free 2 MiB", "alloc 4 MiB", "free 1 MiB", "free 4 MiB"],
           faults_lib.describe_events(trace))
case.finish()
