"""A process that never calls CUDA gets no tracer thread (and no file): the same number of threads in
/proc/self/task with the tracer preloaded as without it. Python prints its own count (1: CPython starts
no thread of its own), traced and untraced.
"""
import os

import e2e_lib
import faults_lib

case = e2e_lib.Case()
argv = [case.args.python, "-c", "import os; print(len(os.listdir('/proc/self/task')))"]
_, untraced = faults_lib.run(argv, faults_lib.untraced_env(case), timeout=30)
_, traced = faults_lib.run(argv, faults_lib.traced_env(case), timeout=30)
faults_lib.echo(untraced, "untraced")
faults_lib.echo(traced, "traced")
case.check("untraced threads", "1", untraced.stdout.strip())
case.check("traced threads (same as untraced)", untraced.stdout.strip(), traced.stdout.strip())
case.check("files written", [], os.listdir(case.args.out_dir))
case.finish()
