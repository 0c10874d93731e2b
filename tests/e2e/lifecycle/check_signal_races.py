"""SIGTERM landing where a signal handler must not wait, RUNS times over (e2e_signal_races; each run a new
process, the signal sent from outside once the program is in its loop, as timeout or Slurm send it):

  malloc        the job's thread is in malloc/free of 64 KiB blocks, holding the allocator's arena lock: the
                tracer's handler writes the trace (compressing a chunk) and must not allocate. Before the
                compression context was made static, 11 of 20 such runs hung. Each run: killed by SIGTERM, the
                trace holds its 4 allocations and one TraceEnd{SIGNAL, 15, 4}, its last record.
  exit_handler  a SIGTERM handler of the program's calls _exit(3) while the thread is in the tracer's hooks
                (cudaMalloc/cudaFree of 4 KiB in a loop): the _exit must finish the trace the way a handler can,
                with bounded waits. Before, 2 of 20 runs hung. Each run: exit status 3, one TraceEnd
                {UNDERSCORE_EXIT, 0, N}, its last record, N = the events in the file.

MEMTRACE_FLUSH_MS = 600000: nothing reaches the file after the header but through the signal path. A hang fails
the run after 15 s (signals_lib.run_and_signal).
"""
import os
import signal

import e2e_lib
import faults_lib
import signals_lib


def add_arguments(parser):
    parser.add_argument("--mode", choices=["malloc", "exit_handler"], required=True)
    parser.add_argument("--runs", type=int, default=10)


case = e2e_lib.Case(add_arguments)
work = faults_lib.work_dir(case)
env = faults_lib.traced_env(case, {"MEMTRACE_FLUSH_MS": "600000"})
for run in range(case.args.runs):
    ready = os.path.join(work, f"ready-{run}")
    outcome = signals_lib.run_and_signal([case.program("signal_races"), case.args.mode, ready], env, ready,
                                         signal.SIGTERM, timeout=15)
    label = f"run {run + 1}"
    trace = faults_lib.only_trace(case)
    if case.args.mode == "malloc":
        case.check(f"{label}: killed by", signal.SIGTERM, outcome.signal)
        events = ["alloc 1 MiB"] * 4
        end = ("SIGNAL", 15, 4)
    else:
        case.check(f"{label}: exit status", 3, outcome.exit_status)
        events = faults_lib.describe_events(trace)  # as many as the loop made before the signal
        end = ("UNDERSCORE_EXIT", 0, len(events))
    faults_lib.check_trace_ends_with(case, trace, events, end, label=f"{label}: ")
    os.remove(trace.path)
case.finish()
