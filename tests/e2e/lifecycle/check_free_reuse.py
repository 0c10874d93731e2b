"""A free and the allocation that reuses its address, on two threads: recorded in the order they happened.

e2e_free_reuse with FAKECUDA_AFTER_FREE_HOOK=1 and FAKECUDA_REUSE_ADDRESSES=1: the main thread frees X (8 MiB); before that free returns
(the memory already released), a second thread allocates 8 MiB and gets X again ("address reused: yes").
What happened, in order: alloc 8 MiB (X), free X, alloc 8 MiB (X, other thread), free X: the trace must
list exactly that (a tracer that records a free only after the call returns lists the second allocation
first: an allocation at a live address, then a free of an unknown address). The analyzer: 4 events, no
unknown or double frees; device 0 peak 8 MiB = 8388608 (never 16), final 0.
"""
import e2e_lib
import faults_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, outcome = faults_lib.run([case.program("free_reuse")], faults_lib.traced_env(case, {"FAKECUDA_AFTER_FREE_HOOK": "1",
                                                                                   "FAKECUDA_REUSE_ADDRESSES": "1"}),
                            timeout=30)
faults_lib.echo(outcome, "e2e_free_reuse")
case.check("exit status", 0, outcome.exit_status)
case.check("address reused (precondition)", True, "address reused: yes" in outcome.stdout.splitlines())
trace = faults_lib.only_trace(case)
case.check("events", ["alloc 8 MiB", "free 8 MiB", "alloc 8 MiB", "free 8 MiB"], faults_lib.describe_events(trace))
case.check("distinct thread ids", 2, len({e["tid"] for e in trace.events()}))
summary = case.analyze("summary", trace.path)
case.check_health(summary, 4)
case.check_devices(summary, {0: {"peak_driver_bytes": 8 * MIB, "final_driver_bytes": 0}})
case.finish()
