"""The inject request (proto/control_protocol.h): e2e_inject_self writes DIR/PID.inject and loads libmemtrace.so into
itself, as `memtrace attach` does to a process started without memtrace.

Mode 0600: the library's constructor takes the request (the file is gone once dlopen returned), and serves the
endpoint in injected mode: `status` answers "ok injected -"; no trace file is written; the socket is removed at
exit. Mode 0644: refused, one line ("the inject request is not a 0600 file of this process's uid; not attaching"),
the file removed all the same, no socket.
"""
import os
import subprocess
import time

import e2e_lib
import faults_lib

case = e2e_lib.Case()
out = case.args.out_dir


def run(mode):
    runtime = os.path.join(out, f"xdg-{mode}")
    os.makedirs(runtime, mode=0o700)
    env = faults_lib.untraced_env(case, {"XDG_RUNTIME_DIR": runtime})
    proc = subprocess.Popen([case.program("inject_self"), case.args.preload, mode], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    case.check(f"{mode}: loaded", "loaded", proc.stdout.readline().strip())
    base = os.path.join(runtime, "memtrace", str(proc.pid))
    return proc, base


proc, base = run("0600")
case.check("0600: the request is taken", False, os.path.exists(base + ".inject"))
case.check("0600: the endpoint", True, os.path.exists(base + ".sock"))
if os.path.exists(base + ".sock"):
    case.check("0600: status", "ok injected -", e2e_lib.control_request(base + ".sock", "status"))
proc.stdin.write("exit\n")
proc.stdin.flush()
_, stderr = proc.communicate(timeout=30)
case.check("0600: exit status", 0, proc.returncode)
case.check("0600: no line", [], faults_lib.memtrace_lines(stderr))
case.check("0600: the socket is removed at exit", False, os.path.exists(base + ".sock"))
case.check("0600: no trace file", [], [f for f in os.listdir(out) if f.endswith(".mtrace")])

proc, base = run("0644")
time.sleep(0.1)
case.check("0644: the request is removed", False, os.path.exists(base + ".inject"))
case.check("0644: no endpoint", False, os.path.exists(base + ".sock"))
proc.stdin.write("exit\n")
proc.stdin.flush()
_, stderr = proc.communicate(timeout=30)
case.check("0644: the line", ["memtrace: the inject request is not a 0600 file of this process's uid; not attaching"],
           faults_lib.memtrace_lines(stderr))
case.finish()
