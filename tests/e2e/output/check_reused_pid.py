"""A reused pid: two jobs that are each pid 1 of their own pid namespace (as in containers) write to the
same expanded name OUT/trace-1.mtrace; the second must not overwrite the first.

e2e_alloc_basic (5 events: alloc 4, alloc 8, alloc 16, free 8, free 4 MiB) run twice under
`unshare --pid --fork` (needs CAP_SYS_ADMIN; skipped with status 77 without it):
  trace-1.mtrace: the first run, TraceStart.pid 1, 5 events, bytes unchanged by the second run
  trace-1.1.mtrace: the second run, TraceStart.pid 1, 5 events
"""
import os
import shutil
import subprocess

import e2e_lib
import faults_lib

EVENTS = ["alloc 4 MiB", "alloc 8 MiB", "alloc 16 MiB", "free 8 MiB", "free 4 MiB"]

case = e2e_lib.Case()
unshare = shutil.which("unshare")
if not unshare or subprocess.run([unshare, "--pid", "--fork", "true"], capture_output=True).returncode != 0:
    print("SKIP: cannot create a pid namespace here")
    raise SystemExit(77)
out = case.args.out_dir
argv = [unshare, "--pid", "--fork", case.program("alloc_basic")]
_, first = faults_lib.run(argv, faults_lib.traced_env(case), timeout=30)
faults_lib.echo(first, "first run")
case.check("first run: exit status", 0, first.exit_status)
first_path = os.path.join(out, "trace-1.mtrace")
first_bytes = open(first_path, "rb").read() if os.path.exists(first_path) else None
_, second = faults_lib.run(argv, faults_lib.traced_env(case), timeout=30)
faults_lib.echo(second, "second run")
case.check("second run: exit status", 0, second.exit_status)
case.check("trace files", ["trace-1.1.mtrace", "trace-1.mtrace"], sorted(os.listdir(out)))
case.check("trace-1.mtrace unchanged by the second run", True,
           first_bytes is not None and open(first_path, "rb").read() == first_bytes)
for name in ("trace-1.mtrace", "trace-1.1.mtrace"):
    path = os.path.join(out, name)
    if os.path.exists(path):
        trace = faults_lib.trace_file.TraceFile(path)
        case.check(f"{name}: TraceStart.pid", 1, trace.pid())
        case.check(f"{name}: events", EVENTS, faults_lib.describe_events(trace))
case.finish()
