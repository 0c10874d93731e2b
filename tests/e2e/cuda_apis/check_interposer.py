"""Another preloaded interposer of cudaMalloc/cudaFree/cuMemAlloc_v2/cuMemFree_v2 that forwards with
dlsym(RTLD_NEXT) keeps working, before or after memtrace in LD_PRELOAD: it sees exactly the calls it sees
without memtrace, and memtrace records each allocation once.

--program alloc_basic: 3 cudaMalloc (4, 8, 16 MiB), 2 cudaFree (8, 4 MiB); no driver call of its own.
  interposer: "cudaMalloc 3 cudaFree 2 cuMemAlloc_v2 0 cuMemFree_v2 0" (the runtime reaches the driver
  through cuGetProcAddress, not through the exported names)
  trace: alloc 4 MiB, alloc 8 MiB, alloc 16 MiB, free 8 MiB, free 4 MiB (5 events), TraceEnd{EXIT}
--program teardown_free (without FAKECUDA_DEINIT_AT_EXIT: every free answers 0):
  cudaMalloc 4 MiB, cuMemAlloc_v2 8 MiB, cudaMalloc 2 MiB, cudaFree 2 MiB, then at exit cudaFree 4 MiB and
  cuMemFree_v2 8 MiB.
  interposer: "cudaMalloc 2 cudaFree 2 cuMemAlloc_v2 1 cuMemFree_v2 1"
  trace: alloc 4 MiB, alloc 8 MiB, alloc 2 MiB, free 2 MiB, free 4 MiB, free 8 MiB (6 events), TraceEnd{EXIT}
The interposer's line is also measured without memtrace and must be the same.
"""
import os

import e2e_lib
import faults_lib

PROGRAMS = {
    "alloc_basic": ("interposer: cudaMalloc 3 cudaFree 2 cuMemAlloc_v2 0 cuMemFree_v2 0",
                    ["alloc 4 MiB", "alloc 8 MiB", "alloc 16 MiB", "free 8 MiB", "free 4 MiB"]),
    "teardown_free": ("interposer: cudaMalloc 2 cudaFree 2 cuMemAlloc_v2 1 cuMemFree_v2 1",
                      ["alloc 4 MiB", "alloc 8 MiB", "alloc 2 MiB", "free 2 MiB", "free 4 MiB", "free 8 MiB"]),
}


def add_arguments(parser):
    parser.add_argument("--order", choices=["memtrace-first", "interposer-first"], required=True)
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="alloc_basic")


case = e2e_lib.Case(add_arguments)
expected_report, expected_events = PROGRAMS[case.args.program]
interposer = os.path.join(case.args.program_dir, "libe2e_interposer.so")
work = faults_lib.work_dir(case)


def report_of(label, preload):
    report = os.path.join(work, f"report-{label}")
    env = faults_lib.traced_env(case, {"LD_PRELOAD": preload, "E2E_INTERPOSER_REPORT": report})
    _, outcome = faults_lib.run([case.program(case.args.program)], env, timeout=30)
    faults_lib.echo(outcome, f"{label}: LD_PRELOAD={preload}")
    case.check(f"{label}: exit status", 0, outcome.exit_status)
    return open(report).read().splitlines() if os.path.exists(report) else []


case.check("interposer's report without memtrace", [expected_report], report_of("untraced", interposer))
order = [case.args.preload, interposer]
if case.args.order == "interposer-first":
    order.reverse()
case.check("interposer's report with memtrace", [expected_report], report_of("traced", ":".join(order)))
trace = faults_lib.only_trace(case)
case.check("events", expected_events, faults_lib.describe_events(trace))
case.check("TraceEnd records (how, events)", [("EXIT", len(expected_events))],
           [(e["how"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
case.finish()
