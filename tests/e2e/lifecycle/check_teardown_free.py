"""Frees during process teardown, answered with 4 by the runtime (cudaErrorCudartUnloading) and the
driver (CUDA_ERROR_DEINITIALIZED): recorded as FREE events with result 4; exit neither hangs nor crashes.

e2e_teardown_free with FAKECUDA_DEINIT_AT_EXIT=1 (MiB = 1048576 bytes):
  main:     cudaMalloc 4 MiB, cuMemAlloc_v2 8 MiB, cudaMalloc 2 MiB, cudaFree 2 MiB
  teardown: cudaFree 4 MiB -> 4, cuMemFree_v2 8 MiB -> 4 (the program prints both results)
  6 events; the last two are teardown frees; TraceEnd{EXIT, events 6}; exit status 0.
Analyzer: trace.teardown_frees 2; device 0 peak 4 + 8 + 2 = 14 MiB = 14680064, final 0 (teardown frees
count as freed), 3 driver allocations, 3 driver frees.
"""
import e2e_lib
import faults_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, outcome = faults_lib.run([case.program("teardown_free")],
                            faults_lib.traced_env(case, {"FAKECUDA_DEINIT_AT_EXIT": "1"}), timeout=30)
faults_lib.echo(outcome, "e2e_teardown_free")
case.check("exit status", 0, outcome.exit_status)
case.check("the double answered 4 at teardown", True,
           "teardown: cudaFree -> 4, cuMemFree_v2 -> 4" in outcome.stdout.splitlines())
trace = faults_lib.only_trace(case)
case.check("events", ["alloc 4 MiB", "alloc 8 MiB", "alloc 2 MiB", "free 2 MiB", "free 4 MiB -> 4", "free 8 MiB -> 4"],
           faults_lib.describe_events(trace))
case.check("TraceEnd records (how, events)", [("EXIT", 6)], [(e["how"], e["events"]) for e in trace.ends()])
case.check("TraceEnd is the last record", faults_lib.trace_file.END, trace.last_record_kind())
summary = case.analyze("summary", trace.path)
case.check("analyzer trace.teardown_frees", 2, summary.get("trace", {}).get("teardown_frees"))
case.check_devices(summary, {0: {"peak_driver_bytes": 14 * MIB, "final_driver_bytes": 0, "driver_allocations": 3,
                                 "driver_frees": 3}})
case.finish()
