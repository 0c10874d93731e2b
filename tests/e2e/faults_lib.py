"""Shared by the fault tests (check_kill9.py, check_crash.py, ...): running a program traced and untraced
with a deadline and its raw wait status (signal, core dump), and listing and reading its trace files.

Trace files go to the case's out directory (MEMTRACE_OUTPUT = OUT/trace-%p.mtrace unless a test says
otherwise); everything else a program writes (ready files, markers, core dumps) goes to OUT/work, so that
the out directory holds trace files only.
"""
import ctypes
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

import trace_file

# Several flush intervals of e2e_lib's MEMTRACE_FLUSH_MS=50: the sleep after which whatever a program
# recorded is due to have been written.
SETTLE_MS = 500


class Outcome:
    """How a process ended: exit_status (None when killed), signal (None when it exited), core_dumped."""

    def __init__(self, status, stdout, stderr):
        self.exit_status = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        self.signal = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        self.core_dumped = os.WIFSIGNALED(status) and os.WCOREDUMP(status)
        self.stdout = stdout
        self.stderr = stderr

    def how(self):
        if self.signal is not None:
            return f"signal {self.signal}" + (" (core dumped)" if self.core_dumped else "")
        return f"exit {self.exit_status}"


def work_dir(case):
    path = os.path.join(case.args.out_dir, "work")
    os.makedirs(path, exist_ok=True)
    return path


def traced_env(case, extra=None):
    return case.env(extra)


def untraced_env(case, extra=None):
    env = case.env(extra)
    env.pop("LD_PRELOAD", None)
    return env


def run(argv, env, timeout=60, cwd=None, preexec_fn=None, wait_until=None):
    """Runs argv and returns its Outcome; exits the checker with FAIL when it runs past `timeout` seconds.
    wait_until(pid) -> bool, when given, is polled while the process runs; once it returns True, the
    function returns None for the outcome and the caller owns the still-running process (pid returned)."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    # A session of its own: on a hang the whole process group goes (children that deadlocked included).
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err, preexec_fn=preexec_fn,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = status  # reaped here; keeps Popen from waiting again
            break
        if wait_until is not None and wait_until(proc.pid):
            return proc, None
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            sys.exit(f"FAIL: {' '.join(argv)} still running after {timeout} s (hang or deadlock)")
        time.sleep(0.01)
    return proc, Outcome(status, read_all(out), read_all(err))


def read_all(f):
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def echo(outcome, label):
    sys.stdout.write(f"--- {label}: {outcome.how()}\n{outcome.stdout}")
    if outcome.stderr:
        sys.stdout.write(f"--- {label} stderr:\n{outcome.stderr}")


def with_core_limit(limit_bytes):
    """preexec_fn: core dumps allowed (written to the working directory under the default core_pattern),
    so that the traced and untraced runs can be compared on whether a core was dumped."""
    def apply():
        resource.setrlimit(resource.RLIMIT_CORE, (limit_bytes, limit_bytes))
    return apply


def trace_paths(case):
    """Regular files in the out directory, sorted by name."""
    out = case.args.out_dir
    return sorted(os.path.join(out, name) for name in os.listdir(out)
                  if os.path.isfile(os.path.join(out, name)) and not os.path.islink(os.path.join(out, name)))


def only_trace(case):
    paths = trace_paths(case)
    if len(paths) != 1:
        sys.exit(f"FAIL: expected exactly one trace file in {case.args.out_dir}, found {paths}")
    return trace_file.TraceFile(paths[0])


def check_fork_at_a_moment(case, program, parent_events):
    """The fork_during_* programs: each forks while another thread is at a chosen point of the tracer, its child
    allocates 2 MiB and frees it, and it prints "child exit status N" (124: the child hung and was killed). Runs
    `program` traced and checks exit status 0, the child's 0, and the two files (check_parent_and_child); finishes
    `case` (an e2e_lib.Case)."""
    proc, outcome = run([case.program(program)], traced_env(case), timeout=60)
    echo(outcome, "e2e_" + program)
    case.check("exit status", 0, outcome.exit_status)
    case.check("child exit status", True, "child exit status 0" in outcome.stdout.splitlines())
    check_parent_and_child(case, proc.pid, {"parent": parent_events, "child": ["alloc 2 MiB", "free 2 MiB"]})
    case.finish()


def check_parent_and_child(case, parent_pid, events_by_process):
    """The fork tests' two files: one trace whose TraceStart.pid is the parent's ("parent") and one other ("child"),
    each with exactly the events described (describe_events) and one TraceEnd{EXIT} counting them; the child's
    TraceStart.ppid is the parent. events_by_process: {"parent": [...], "child": [...]}."""
    files = {}
    for path in trace_paths(case):
        trace = trace_file.TraceFile(path)
        files["parent" if trace.pid() == parent_pid else "child"] = trace
    case.check("trace files (parent, child)", ["child", "parent"], sorted(files))
    for label, events in sorted(events_by_process.items(), reverse=True):
        trace = files.get(label)
        if not trace:
            continue
        case.check(f"{label}: events", events, describe_events(trace))
        case.check(f"{label}: TraceEnd records (how, events)", [("EXIT", len(events))],
                   [(e["how"], e["events"]) for e in trace.ends()])
        if label == "child":
            case.check("child: TraceStart.ppid", parent_pid, trace.ppid())


def describe_events(trace):
    """The trace's events in order as the programs' comments list them: "alloc 4 MiB", "free 4 MiB"
    (a free named by the size of the allocation at its address in the same file; "free ?" if there is
    none), "oom 8 MiB"; a non-zero result is appended as " -> 4"."""
    sizes = {}
    described = []
    for e in trace.events():
        if e["kind"] == trace_file.ALLOC:
            sizes[e["address"]] = e["size"]
            text = "alloc " + mib(e["size"])
        elif e["kind"] == trace_file.FREE:
            size = sizes.pop(e["address"], None)
            text = "free " + (mib(size) if size is not None else "?")
        elif e["kind"] == trace_file.OOM:
            text = "oom " + mib(e["size"])
        else:
            text = f"kind {e['kind']}"
        described.append(text + (f" -> {e['result']}" if e["result"] else ""))
    return described


def check_trace_ends_with(case, trace, events, end, label=""):
    """The checks of a trace that must end with one TraceEnd: read to a frame boundary, exactly `events`
    (describe_events), one TraceEnd `end` = (how, signal, events) as its last record, and the analyzer's
    trace.end saying the same. `label` prefixes each check's name."""
    case.check(f"{label}file ends on a frame boundary", True, trace.complete)
    case.check(f"{label}events", events, describe_events(trace))
    case.check(f"{label}TraceEnd records (how, signal, events)", [end],
               [(e["how"], e["signal"], e["events"]) for e in trace.ends()])
    case.check(f"{label}TraceEnd is the last record", trace_file.END, trace.last_record_kind())
    summary = case.analyze("summary", trace.path)
    case.check(f"{label}analyzer trace.end", {"how": end[0], "signal": end[1]},
               summary.get("trace", {}).get("end"))


def mib(size):
    return f"{size >> 20} MiB" if size % (1 << 20) == 0 else f"{size} bytes"


def memtrace_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("memtrace:")]


def signal_name(number):
    return signal.Signals(number).name


# ---- holding the tracer's writer thread still (ptrace), for the full-buffer tests ----

PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WAIT_ALL = 0x40000000  # __WALL: wait for a thread of another process
SYS_FUTEX = 202  # x86-64

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def ptrace(request, tid):
    if libc.ptrace(request, tid, None, None) != 0:
        raise SystemExit(f"FAIL: ptrace({request}, {tid}): {os.strerror(ctypes.get_errno())}")


def writer_thread(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == "memtrace-writer":
                return int(tid)
    return None


def resident_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def stop_while_idle(pid, tid):
    """Stops the writer where it waits for its next flush (in futex), not in the middle of a flush."""
    for _ in range(100):
        ptrace(PTRACE_SEIZE, tid)
        ptrace(PTRACE_INTERRUPT, tid)
        os.waitpid(tid, WAIT_ALL)
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            if f.read().split()[0] == str(SYS_FUTEX):
                return
        ptrace(PTRACE_DETACH, tid)
        time.sleep(0.02)
    raise SystemExit("FAIL: the writer thread was never found waiting")




def start_flood_with_writer_stopped(case, work, pairs, env):
    """Runs e2e_flood WORK PAIRS under `env`, waits until it has started, finds the tracer's writer thread
    and stops it where it waits for its next flush. Returns (proc, writer tid); the loop starts once the
    caller creates WORK/go."""
    proc, outcome = run([case.program("flood"), work, str(pairs)], env, timeout=30,
                        wait_until=lambda pid: os.path.exists(os.path.join(work, "started")))
    if outcome is not None:
        echo(outcome, "e2e_flood")
        raise SystemExit(f"FAIL: e2e_flood ended early: {outcome.how()}")
    deadline = time.monotonic() + 10  # the thread names itself once it runs
    tid = writer_thread(proc.pid)
    while tid is None and time.monotonic() < deadline:
        time.sleep(0.01)
        tid = writer_thread(proc.pid)
    if tid is None:
        os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit("FAIL: no thread named memtrace-writer")
    stop_while_idle(proc.pid, tid)
    return proc, tid


def wait_for_exit(proc, what, timeout=60):
    """Waits for `proc` (started by run()) to exit; kills it and fails after `timeout` seconds. Returns its
    exit status as a number, or "signal N"."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else f"signal {os.WTERMSIG(status)}"
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise SystemExit(f"FAIL: {what}")
        time.sleep(0.05)
