"""An output path whose directory does not exist, is not a directory, or cannot be written: the job runs
on unaffected (exit status 0, its own output complete), stderr has exactly one line starting with
"memtrace:", and no file or directory is created.

e2e_alloc_basic prints "done, ... still live" at its end and exits 0.
  1. OUT/missing/trace.mtrace (OUT/missing does not exist: it is not created)
  2. OUT/work/a-file/trace.mtrace (a-file is a regular file)
  3. OUT/work/read-only/trace.mtrace, a directory of mode 0555, the program run as user nobody (65534)
     when the checker runs as root (root writes anywhere)
An output path that exists but cannot be a trace file: the same, the one line says why, and the name the tracer
takes beside an existing file (PATH.1) is not created either:
  4. OUT/work/a-dir, a directory:  "... OUT/work/a-dir: it is a directory (...)"
  5. /dev/zero, a device:          "... /dev/zero: it is not a regular file (...)"
  6. /dev/stdout, which the checker redirects to a temporary file: "... it is the job's standard input, ..."
Each line reads "memtrace: cannot create trace file PATH: WHY; not tracing this process", as for case 3.
"""
import os

import e2e_lib
import faults_lib

case = e2e_lib.Case()
out = case.args.out_dir
work = faults_lib.work_dir(case)
with open(os.path.join(work, "a-file"), "w") as f:
    f.write("a file\n")
read_only = os.path.join(work, "read-only")
os.mkdir(read_only)
os.chmod(read_only, 0o555)
os.chmod(work, 0o755)


def as_nobody():
    if os.getuid() == 0:
        os.setgid(65534)
        os.setuid(65534)


cases = [
    ("missing directory", os.path.join(out, "missing", "trace.mtrace"), None),
    ("parent is a file", os.path.join(work, "a-file", "trace.mtrace"), None),
    ("read-only directory", os.path.join(read_only, "trace.mtrace"), as_nobody),
]
for label, path, preexec in cases:
    _, outcome = faults_lib.run([case.program("alloc_basic")], faults_lib.traced_env(case, {"MEMTRACE_OUTPUT": path}),
                                timeout=30, preexec_fn=preexec)
    faults_lib.echo(outcome, label)
    case.check(f"{label}: exit status", 0, outcome.exit_status)
    case.check(f"{label}: program finished", True, "done," in outcome.stdout)
    lines = faults_lib.memtrace_lines(outcome.stderr)
    case.check(f"{label}: lines on stderr starting with memtrace:", 1, len(lines))
    case.check(f"{label}: trace file created", False, os.path.lexists(path))

a_dir = os.path.join(work, "a-dir")
os.mkdir(a_dir)
existing = [
    ("names a directory", a_dir, "it is a directory (MEMTRACE_OUTPUT names the trace file)"),
    ("names a device", "/dev/zero",
     "it is not a regular file (MEMTRACE_OUTPUT names the trace file; /dev/null traces without writing)"),
    ("names the job's standard output", "/dev/stdout",
     "it is the job's standard input, output or error (MEMTRACE_OUTPUT names the trace file)"),
]
for label, path, why in existing:
    _, outcome = faults_lib.run([case.program("alloc_basic")], faults_lib.traced_env(case, {"MEMTRACE_OUTPUT": path}),
                                timeout=30)
    faults_lib.echo(outcome, label)
    case.check(f"{label}: exit status", 0, outcome.exit_status)
    case.check(f"{label}: program finished", True, "done," in outcome.stdout)
    case.check(f"{label}: lines on stderr starting with memtrace:",
               [f"memtrace: cannot create trace file {path}: {why}; not tracing this process"],
               faults_lib.memtrace_lines(outcome.stderr))
    case.check(f"{label}: {path}.1 created", False, os.path.lexists(path + ".1"))
case.check("files in the directory named", [], os.listdir(a_dir))
case.check("missing directory created", False, os.path.exists(os.path.join(out, "missing")))
case.check("files in the read-only directory", [], os.listdir(read_only))
case.finish()
