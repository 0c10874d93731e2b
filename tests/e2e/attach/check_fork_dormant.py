"""A dormant process forks (e2e_fork_dormant): the child has no endpoint until its own first CUDA call, and its live
set holds its own allocation only.

Parent: 1 MiB live at address A, dormant, its socket there. Child, before its first CUDA call (0.3 s after it
printed its pid): no socket. After it cudaMallocs 2 MiB at B: its socket appears; its snapshot's LiveAtAttach
records are exactly [(LAYER_DRIVER, B, 2 MiB)] (not the parent's A); the parent's snapshot is exactly
[(LAYER_DRIVER, A, 1 MiB)]. The child exits 0, the parent dies of SIGTERM (no handler of its own); both
sockets are removed on the way.
"""
import os
import signal
import socket
import subprocess
import time

import e2e_lib
import faults_lib
import trace_file as tf

case = e2e_lib.Case()
out = case.args.out_dir
runtime = os.path.join(out, "xdg")
os.makedirs(runtime, mode=0o700)
LAYER_DRIVER = tf.PROTO["Layer"]["LAYER_DRIVER"]


request = e2e_lib.control_request
wait_for = e2e_lib.wait_for_file


def snapshot(sock, name):
    path = os.path.join(out, name)
    case.check(f"{name}: reply", f"ok {path}", request(sock, f"snapshot {path}"))
    return [(e["layer"], e["address"], e["size"]) for e in tf.TraceFile(path).live_at_attach()]


env = faults_lib.traced_env(case, {"MEMTRACE_START": "dormant", "XDG_RUNTIME_DIR": runtime})
proc = subprocess.Popen([case.program("fork_dormant")], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
_, parent_pid, parent_address = proc.stdout.readline().split()
_, child_pid = proc.stdout.readline().split()
parent_sock = os.path.join(runtime, "memtrace", f"{parent_pid}.sock")
child_sock = os.path.join(runtime, "memtrace", f"{child_pid}.sock")
case.check("the parent's endpoint", True, wait_for(parent_sock))
time.sleep(0.3)
case.check("no endpoint for the child before its first CUDA call", False, os.path.exists(child_sock))
os.kill(int(child_pid), signal.SIGUSR1)
_, child_address = proc.stdout.readline().split()
case.check("the child's endpoint after it", True, wait_for(child_sock))
case.check("the child's live set", [(LAYER_DRIVER, int(child_address), 2 << 20)], snapshot(child_sock, "child.mtrace"))
case.check("the parent's live set", [(LAYER_DRIVER, int(parent_address), 1 << 20)],
           snapshot(parent_sock, "parent.mtrace"))
os.kill(int(child_pid), signal.SIGUSR2)
deadline = time.time() + 10
while os.path.exists(child_sock) and time.time() < deadline:
    time.sleep(0.02)
os.kill(proc.pid, signal.SIGTERM)
_, stderr = proc.communicate(timeout=30)
case.check("the parent dies of SIGTERM", -signal.SIGTERM, proc.returncode)
case.check("both sockets removed", [False, False], [os.path.exists(child_sock), os.path.exists(parent_sock)])
case.finish()
