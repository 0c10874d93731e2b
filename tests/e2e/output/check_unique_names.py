"""Trace file names stay unique and nothing existing is overwritten or followed; files are mode 0600.

e2e_alloc_basic records 5 events: alloc 4 MiB, alloc 8 MiB, alloc 16 MiB, free 8 MiB, free 4 MiB.
All runs use umask 0, so a file the tracer created with any mode other than 0600 shows that mode.
  1. MEMTRACE_OUTPUT=OUT/fixed.mtrace three times -> fixed.mtrace, fixed.1.mtrace, fixed.2.mtrace, each
     with its own run's pid and 5 events; fixed.mtrace's bytes unchanged by runs 2 and 3.
  2. OUT/pre.mtrace exists (not a trace) -> it is left as it was, pre.1.mtrace is the trace.
  3. OUT/link.mtrace is a symlink to OUT/work/target (which does not exist) -> the target is not created,
     the link stays a link, link.1.mtrace is a regular file with the trace.
  4. OUT/plain.trace exists (no .mtrace extension) -> plain.trace.1 is the trace.
"""
import os
import stat

import e2e_lib
import faults_lib

EVENTS = ["alloc 4 MiB", "alloc 8 MiB", "alloc 16 MiB", "free 8 MiB", "free 4 MiB"]

case = e2e_lib.Case()
out = case.args.out_dir
work = faults_lib.work_dir(case)


def run_with_output(name):
    proc, outcome = faults_lib.run([case.program("alloc_basic")],
                                   faults_lib.traced_env(case, {"MEMTRACE_OUTPUT": os.path.join(out, name)}),
                                   timeout=30, preexec_fn=lambda: os.umask(0))
    faults_lib.echo(outcome, f"e2e_alloc_basic with MEMTRACE_OUTPUT={name}")
    case.check(f"{name}: exit status", 0, outcome.exit_status)
    return proc.pid


def check_trace(name, pid):
    path = os.path.join(out, name)
    st = os.lstat(path) if os.path.lexists(path) else None
    case.check(f"{name}: a regular file", True, st is not None and stat.S_ISREG(st.st_mode))
    if st is None or not stat.S_ISREG(st.st_mode):
        return
    case.check(f"{name}: mode", "0o600", oct(stat.S_IMODE(st.st_mode)))
    trace = faults_lib.trace_file.TraceFile(path)
    case.check(f"{name}: TraceStart.pid", pid, trace.pid())
    case.check(f"{name}: events", EVENTS, faults_lib.describe_events(trace))


# 1. A fixed name used three times.
pid = run_with_output("fixed.mtrace")
with open(os.path.join(out, "fixed.mtrace"), "rb") as f:
    first_bytes = f.read()
check_trace("fixed.mtrace", pid)
check_trace("fixed.1.mtrace", run_with_output("fixed.mtrace"))
check_trace("fixed.2.mtrace", run_with_output("fixed.mtrace"))
with open(os.path.join(out, "fixed.mtrace"), "rb") as f:
    case.check("fixed.mtrace unchanged by the later runs", True, f.read() == first_bytes)

# 2. An existing file that is not a trace.
with open(os.path.join(out, "pre.mtrace"), "w") as f:
    f.write("not a trace\n")
check_trace("pre.1.mtrace", run_with_output("pre.mtrace"))
with open(os.path.join(out, "pre.mtrace")) as f:
    case.check("pre.mtrace content", "not a trace\n", f.read())

# 3. A symlink at the output path, to a file that does not exist yet.
target = os.path.join(work, "target")
os.symlink(target, os.path.join(out, "link.mtrace"))
check_trace("link.1.mtrace", run_with_output("link.mtrace"))
case.check("symlink target created", False, os.path.lexists(target))
case.check("link.mtrace still a symlink", True, os.path.islink(os.path.join(out, "link.mtrace")))

# 4. No .mtrace extension: the number is appended.
with open(os.path.join(out, "plain.trace"), "w") as f:
    f.write("existing\n")
check_trace("plain.trace.1", run_with_output("plain.trace"))

case.check("files in the out directory",
           sorted(["fixed.mtrace", "fixed.1.mtrace", "fixed.2.mtrace", "pre.mtrace", "pre.1.mtrace", "link.mtrace",
                   "link.1.mtrace", "plain.trace", "plain.trace.1", "work"]),
           sorted(os.listdir(out)))
case.finish()
