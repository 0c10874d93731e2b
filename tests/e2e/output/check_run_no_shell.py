"""`memtrace run` executes the command directly, never through a shell.

  memtrace run -o OUT/a.mtrace -- "echo hi; true"   -> there is no program named "echo hi; true": a
      non-zero status, and "hi" is never printed (a shell would print it and exit 0)
  memtrace run -o OUT/b.mtrace -- /bin/echo 'hi; $HOME `id`' -> prints exactly that text (no expansion)
Neither command calls CUDA: no trace file.
"""
import os
import subprocess

import e2e_lib

case = e2e_lib.Case()
env = dict(os.environ, LD_LIBRARY_PATH=case.args.fake_lib_dir)
env.pop("LD_PRELOAD", None)
env.pop("MEMTRACE_OUTPUT", None)


def memtrace_run(name, argv):
    proc = subprocess.run([case.args.memtrace, "run", "-o", os.path.join(case.args.out_dir, name), "--", *argv],
                          env=env, capture_output=True, text=True, timeout=30)
    print(f"--- memtrace run {argv}: status {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc


first = memtrace_run("a.mtrace", ["echo hi; true"])
case.check("status of a command named 'echo hi; true' is non-zero", True, first.returncode != 0)
case.check("'hi' printed", False, "hi" in first.stdout.split())
literal = "hi; $HOME `id`"
second = memtrace_run("b.mtrace", ["/bin/echo", literal])
case.check("status of /bin/echo", 0, second.returncode)
case.check("/bin/echo's output", literal + "\n", second.stdout)
case.check("trace files", [], os.listdir(case.args.out_dir))
case.finish()
