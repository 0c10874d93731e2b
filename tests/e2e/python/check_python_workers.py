"""multiprocessing workers (fork or spawn start method), as a DataLoader with num_workers=2 starts them.

python_workers.py: the parent allocates 4 MiB, starts 2 workers, joins them, frees the 4 MiB; each worker
allocates 8 MiB and frees it. A forked worker ends with os._exit (multiprocessing's popen_fork); a spawned
one is a new interpreter that ends with sys.exit (multiprocessing.spawn.spawn_main): a normal exit.
  parent's file: ["alloc 4 MiB", "free 4 MiB"], TraceEnd{EXIT, events 2}
  each worker's file (2 of them, TraceStart.ppid = parent): ["alloc 8 MiB", "free 8 MiB"],
      TraceEnd{UNDERSCORE_EXIT (fork) or EXIT (spawn), events 2}
  no other file (spawn's helper processes never call CUDA); exit status 0; both workers exit code 0.
Every file's TraceStart.python_frames is the interpreter's sys.hexversion, and `memtrace summary --json` gives
its trace.python_version as "major.minor.micro" (a final release): a forked worker inherits the parent's Python
state without detecting it again, and must still name the version its stacks' Python frames come from.
"""
import subprocess

import e2e_lib
import faults_lib
import trace_file


def add_arguments(parser):
    parser.add_argument("--start-method", choices=["fork", "spawn"], required=True)


case = e2e_lib.Case(add_arguments)
proc, outcome = faults_lib.run([case.args.python, case.source("python_workers.py"), case.args.start_method],
                               faults_lib.traced_env(case), timeout=60, cwd=faults_lib.work_dir(case))
faults_lib.echo(outcome, f"python_workers.py {case.args.start_method}")
case.check("exit status", 0, outcome.exit_status)
case.check("workers' exit codes", 2, outcome.stdout.count(" exit code 0"))
parent, workers = [], []
for path in faults_lib.trace_paths(case):
    trace = faults_lib.trace_file.TraceFile(path)
    (parent if trace.pid() == proc.pid else workers).append(trace)
python_hex, python_version = subprocess.run(
    [case.args.python, "-c", "import sys, platform; print(sys.hexversion, platform.python_version())"],
    capture_output=True, text=True, check=True).stdout.split()
for trace in parent + workers:
    label = "parent" if trace.pid() == proc.pid else f"worker {trace.pid()}"
    case.check(f"{label}: TraceStart.python_frames", int(python_hex),
               trace_file.first(trace.start() or {}, trace_file.START_FIELDS["python_frames"], 0))
    case.check(f"{label}: --json trace.python_version", python_version,
               case.analyze("summary", trace.path)["trace"]["python_version"])
case.check("parent's files", 1, len(parent))
case.check("workers' files", 2, len(workers))
for trace in parent:
    case.check("parent: events", ["alloc 4 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
    case.check("parent: TraceEnd records (how, events)", [("EXIT", 2)], [(e["how"], e["events"]) for e in trace.ends()])
for n, trace in enumerate(workers):
    case.check(f"worker {n}: ppid", proc.pid, trace.ppid())
    case.check(f"worker {n}: events", ["alloc 8 MiB", "free 8 MiB"], faults_lib.describe_events(trace))
    how = "UNDERSCORE_EXIT" if case.args.start_method == "fork" else "EXIT"
    case.check(f"worker {n}: TraceEnd records (how, events)", [(how, 2)],
               [(e["how"], e["events"]) for e in trace.ends()])
case.finish()
