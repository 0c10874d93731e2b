"""Shared by the ending-signal tests (check_ending_signal.py, check_blocking_read.py, check_python_sigint.py):
running a program until it is ready and then signalling it from outside, and the signal dispositions a program
starts with."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import faults_lib


def run_and_signal(argv, env, ready, number, timeout=30, cwd=None, preexec_fn=None):
    """Runs argv until the file `ready` exists, sends it signal `number` (as timeout, Slurm or Kubernetes do)
    and returns its faults_lib.Outcome. Exits the checker with FAIL when it ends before `ready` appears or runs
    past `timeout` seconds."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err, preexec_fn=preexec_fn,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    signalled = False
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = status  # reaped here; keeps Popen from waiting again
            outcome = faults_lib.Outcome(status, faults_lib.read_all(out), faults_lib.read_all(err))
            if not signalled:
                faults_lib.echo(outcome, "early end")
                sys.exit(f"FAIL: {' '.join(argv)} ended before it was signalled: {outcome.how()}")
            return outcome
        if not signalled and os.path.exists(ready):
            os.kill(proc.pid, number)
            signalled = True
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            sys.exit(f"FAIL: {' '.join(argv)} still running after {timeout} s (hang or deadlock)")
        time.sleep(0.01)


def ignoring(number, then=None):
    """preexec_fn: the program starts with signal `number` ignored (SIG_IGN survives exec, as under nohup), then
    runs `then` (another preexec_fn) if given."""
    def apply():
        signal.signal(number, signal.SIG_IGN)
        if then:
            then()
    return apply
