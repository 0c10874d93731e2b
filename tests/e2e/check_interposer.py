"""Another preloaded interposer of cudaMalloc/cudaFree that forwards with dlsym(RTLD_NEXT) keeps working,
before or after memtrace in LD_PRELOAD, and memtrace records each allocation once.

e2e_alloc_basic: 3 cudaMalloc (4, 8, 16 MiB), 2 cudaFree (8, 4 MiB).
  interposer's report: "interposer: cudaMalloc 3 cudaFree 2"
  trace: alloc 4 MiB, alloc 8 MiB, alloc 16 MiB, free 8 MiB, free 4 MiB (5 events), TraceEnd{EXIT}
"""
import os

import e2e_lib
import faults_lib


def add_arguments(parser):
    parser.add_argument("--order", choices=["memtrace-first", "interposer-first"], required=True)


case = e2e_lib.Case(add_arguments)
interposer = os.path.join(case.args.program_dir, "libe2e_interposer.so")
report = os.path.join(faults_lib.work_dir(case), "interposer-report")
order = [case.args.preload, interposer]
if case.args.order == "interposer-first":
    order.reverse()
_, outcome = faults_lib.run([case.program("alloc_basic")],
                            faults_lib.traced_env(case, {"LD_PRELOAD": ":".join(order),
                                                         "E2E_INTERPOSER_REPORT": report}), timeout=30)
faults_lib.echo(outcome, f"e2e_alloc_basic with LD_PRELOAD={':'.join(order)}")
case.check("exit status", 0, outcome.exit_status)
case.check("interposer's report", ["interposer: cudaMalloc 3 cudaFree 2"],
           open(report).read().splitlines() if os.path.exists(report) else [])
trace = faults_lib.only_trace(case)
case.check("events", ["alloc 4 MiB", "alloc 8 MiB", "alloc 16 MiB", "free 8 MiB", "free 4 MiB"],
           faults_lib.describe_events(trace))
case.check("TraceEnd records (how, events)", [("EXIT", 5)], [(e["how"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
case.finish()
