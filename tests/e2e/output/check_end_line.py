"""The line the tracer prints on stderr when a trace is finished, naming the file:
`memtrace: wrote PATH (N events, B bytes)`, N the TraceEnd's event count, B the file's size once it is written.
One line per trace, from the process that wrote it, after its `memtrace: tracing to PATH` line; none of either
with MEMTRACE_QUIET=1.

  1. e2e_alloc_basic (alloc 4, 8, 16 MiB, free 8, 4 MiB: 5 events), a normal exit: exactly the two lines
     "tracing to OUT/basic.mtrace" and "wrote OUT/basic.mtrace (5 events, B bytes)", B = the file's size.
  2. The same with MEMTRACE_QUIET=1: no line starting with "memtrace:".
  3. MEMTRACE_OUTPUT=/dev/null: nothing to measure, so "wrote /dev/null (5 events)".
  4. e2e_exit_paths _exit (alloc 4, alloc 8, free 4 MiB: 3 events; exit status 7), the _exit path (no atexit).
  5. e2e_crash segv none (the same 3 events, then a null store with no handler): the fatal-signal path, which
     prints with write(2) from the handler; the process still dies by SIGSEGV.
  6. e2e_exec_chain first execv: the first image (alloc 4 MiB: 1 event) ends with TraceEnd{EXEC}, the second
     (alloc 8, free 8 MiB: 2 events) writes NAME.1.mtrace: in order, tracing to NAME, tracing to NAME.1, "wrote
     NAME.1 (2 events, B2 bytes)". No line at the exec: the new image says its own file, and an exec that fails
     (execvp trying each directory of PATH) would print one for each try.
  7. e2e_fork_child: the parent (4 events) and the child that calls CUDA (3 events) each print both lines for
     their own file; the child that never calls CUDA prints none.
  8. e2e_end_line_cases chdir, MEMTRACE_OUTPUT=rel.mtrace in WORK (alloc 1 MiB: 1 event), then chdir("/"): both
     lines name WORK/rel.mtrace, and the end line has its size.
  9. e2e_end_line_cases stderr_gone: the checker reads the start line and closes stderr's pipe; the job exits 0
     (as untraced), not killed by SIGPIPE when the end line finds no reader.
"""
import subprocess
import os
import re
import signal

import e2e_lib
import faults_lib

case = e2e_lib.Case()
out = case.args.out_dir
work = faults_lib.work_dir(case)


def run(label, argv, extra_env):
    proc, outcome = faults_lib.run(argv, faults_lib.traced_env(case, extra_env), timeout=30, cwd=work)
    faults_lib.echo(outcome, label)
    return proc, outcome, faults_lib.memtrace_lines(outcome.stderr)


def wrote(path, events):
    """The end-of-trace line for `path`, whose size is read now (the process has ended)."""
    return f"memtrace: wrote {path} ({events} event{'' if events == 1 else 's'}, {os.path.getsize(path)} bytes)"


def events_in_trace_end(path):
    return [e["events"] for e in faults_lib.trace_file.TraceFile(path).ends()]


# 1. A normal exit.
basic = os.path.join(out, "basic.mtrace")
_, outcome, lines = run("alloc_basic", [case.program("alloc_basic")], {"MEMTRACE_OUTPUT": basic})
case.check("normal exit: exit status", 0, outcome.exit_status)
case.check("normal exit: TraceEnd events", [5], events_in_trace_end(basic))
case.check("normal exit: memtrace lines", [f"memtrace: tracing to {basic}", wrote(basic, 5)], lines)

# 2. Quiet.
quiet = os.path.join(out, "quiet.mtrace")
_, outcome, lines = run("alloc_basic quiet", [case.program("alloc_basic")],
                        {"MEMTRACE_OUTPUT": quiet, "MEMTRACE_QUIET": "1"})
case.check("quiet: exit status", 0, outcome.exit_status)
case.check("quiet: TraceEnd events", [5], events_in_trace_end(quiet))
case.check("quiet: memtrace lines", [], lines)

# 3. /dev/null: no file, no size.
_, outcome, lines = run("alloc_basic to /dev/null", [case.program("alloc_basic")], {"MEMTRACE_OUTPUT": "/dev/null"})
case.check("/dev/null: exit status", 0, outcome.exit_status)
case.check("/dev/null: memtrace lines",
           ["memtrace: tracing to /dev/null", "memtrace: wrote /dev/null (5 events)"], lines)

# 4. _exit.
underscore_exit = os.path.join(out, "underscore-exit.mtrace")
_, outcome, lines = run("exit_paths _exit", [case.program("exit_paths"), "_exit"],
                        {"MEMTRACE_OUTPUT": underscore_exit})
case.check("_exit: exit status", 7, outcome.exit_status)
case.check("_exit: TraceEnd events", [3], events_in_trace_end(underscore_exit))
case.check("_exit: memtrace lines", [f"memtrace: tracing to {underscore_exit}", wrote(underscore_exit, 3)], lines)

# 5. A fatal signal without a handler of the program's.
crash = os.path.join(out, "crash.mtrace")
_, outcome, lines = run("crash segv none", [case.program("crash"), "segv", "none", os.path.join(work, "marker")],
                        {"MEMTRACE_OUTPUT": crash})
case.check("crash: killed by", int(signal.SIGSEGV), outcome.signal)
case.check("crash: TraceEnd events", [3], events_in_trace_end(crash))
case.check("crash: memtrace lines", [f"memtrace: tracing to {crash}", wrote(crash, 3)], lines)

# 6. exec: one trace per image, each line in turn.
first = os.path.join(out, "exec.mtrace")
second = os.path.join(out, "exec.1.mtrace")
_, outcome, lines = run("exec_chain", [case.program("exec_chain"), "first", "execv"], {"MEMTRACE_OUTPUT": first})
case.check("exec: exit status", 0, outcome.exit_status)
case.check("exec: first image's TraceEnd events", [1], events_in_trace_end(first))
case.check("exec: second image's TraceEnd events", [2], events_in_trace_end(second))
case.check("exec: memtrace lines",
           [f"memtrace: tracing to {first}", f"memtrace: tracing to {second}", wrote(second, 2)], lines)

# 7. fork: each process that traces says its own file. The two processes' lines interleave in any order, but
# each process's "wrote" comes after its "tracing to".
proc, outcome, lines = run("fork_child", [case.program("fork_child")],
                           {"MEMTRACE_OUTPUT": os.path.join(out, "fork-%p.mtrace")})
case.check("fork: exit status", 0, outcome.exit_status)
child1 = int(dict(re.findall(r"^(child[12]) (\d+)$", outcome.stdout, re.M)).get("child1", -1))
parent_trace = os.path.join(out, f"fork-{proc.pid}.mtrace")
child_trace = os.path.join(out, f"fork-{child1}.mtrace")
case.check("fork: parent's TraceEnd events", [4], events_in_trace_end(parent_trace))
case.check("fork: child's TraceEnd events", [3], events_in_trace_end(child_trace))
for label, path, events in (("parent", parent_trace, 4), ("child 1", child_trace, 3)):
    own = [line for line in lines if line.endswith(path) or f" {path} (" in line]
    case.check(f"fork: {label}'s memtrace lines", [f"memtrace: tracing to {path}", wrote(path, events)], own)
case.check("fork: memtrace lines in all (2 per tracing process, none from child 2)", 4, len(lines))

# 8. A relative trace path, then the job changes directory.
relative = os.path.join(work, "rel.mtrace")
_, outcome, lines = run("chdir", [case.program("end_line_cases"), "chdir"], {"MEMTRACE_OUTPUT": "rel.mtrace"})
case.check("chdir: exit status", 0, outcome.exit_status)
case.check("chdir: TraceEnd events", [1], events_in_trace_end(relative))
case.check("chdir: memtrace lines", [f"memtrace: tracing to {relative}", wrote(relative, 1)], lines)

# 9. stderr's reader goes away while the job runs.
gone = os.path.join(out, "stderr_gone.mtrace")
proc = subprocess.Popen([case.program("end_line_cases"), "stderr_gone"],
                        env=faults_lib.traced_env(case, {"MEMTRACE_OUTPUT": gone}), cwd=work,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
case.check("stderr gone: start line", f"memtrace: tracing to {gone}\n", proc.stderr.readline().decode())
proc.stderr.close()
case.check("stderr gone: exit status (0, as untraced; -13 would be SIGPIPE)", 0, proc.wait(timeout=30))
case.check("stderr gone: TraceEnd events", [1], events_in_trace_end(gone))
case.finish()
