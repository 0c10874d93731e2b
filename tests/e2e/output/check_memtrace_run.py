"""`memtrace run [-o PATH] -- CMD ARGS...`: runs CMD with the tracer preloaded, keeps an existing
LD_PRELOAD, writes the trace to PATH and returns CMD's exit status.

The traced program is runtime_two_devices (figures in check_runtime_two_devices.py): peak driver bytes
12 MiB = 12582912 on device 0 and 20 MiB = 20971520 on device 1 (16 MiB of cudaMalloc + the 4 MiB its
pool holds).
"""
import os
import subprocess

import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
env = dict(os.environ, LD_LIBRARY_PATH=case.args.fake_lib_dir)
env.pop("LD_PRELOAD", None)
env.pop("MEMTRACE_OUTPUT", None)


def memtrace_run(argv, extra_env=None):
    proc = subprocess.run([case.args.memtrace, "run", *argv], env=dict(env, **(extra_env or {})),
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout


trace = os.path.join(case.args.out_dir, "run.mtrace")
status, _ = memtrace_run(["-o", trace, "--", case.program("runtime_two_devices")])
case.check("exit status of a traced program", 0, status)
case.check("trace written to the -o path", True, os.path.isfile(trace))
if os.path.isfile(trace):
    summary = case.analyze("summary", trace)
    case.check_devices(summary, {0: {"peak_driver_bytes": 12 * MIB}, 1: {"peak_driver_bytes": 20 * MIB}})

# An existing LD_PRELOAD stays, after the tracer; the fake libc10.so is a harmless library to preload.
other = os.path.join(case.args.fake_lib_dir, "libc10.so")
status, out = memtrace_run(["-o", os.path.join(case.args.out_dir, "unused.mtrace"), "--", case.args.python, "-c",
                            "import os; print(os.environ['LD_PRELOAD'])"], {"LD_PRELOAD": other})
case.check("LD_PRELOAD seen by the command", f"{os.path.realpath(case.args.preload)}:{other}",
           ":".join(os.path.realpath(p) if "libmemtrace" in p else p for p in out.strip().split(":")))
case.check("no trace from a command that never calls CUDA", False,
           os.path.exists(os.path.join(case.args.out_dir, "unused.mtrace")))

status, _ = memtrace_run(["--", case.args.python, "-c", "raise SystemExit(7)"])
case.check("exit status passed through", 7, status)


# -o naming a directory or a device is refused before CMD runs (the tracer would write PATH.1 beside it):
# exit 2, one line naming the path, and the command never started (it would have created `started`).
def refused_output(label, path, expected_line):
    started = os.path.join(case.args.out_dir, "started-" + label)
    proc = subprocess.run([case.args.memtrace, "run", "-o", path, "--", case.args.python, "-c",
                           f"open({started!r}, 'w')"], env=env, capture_output=True, text=True, timeout=120)
    case.check(f"-o {label}: exit status", 2, proc.returncode)
    case.check(f"-o {label}: message", expected_line, proc.stderr)
    case.check(f"-o {label}: command not run", False, os.path.exists(started))


refused_output("directory", case.args.out_dir,
               f"memtrace: {case.args.out_dir}: is a directory; -o takes the trace's file name\n")
refused_output("device", "/dev/zero", "memtrace: /dev/zero: not a regular file; -o takes the trace's file name\n")
case.finish()
