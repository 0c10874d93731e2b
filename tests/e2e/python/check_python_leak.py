"""A Python program (ctypes + the shared runtime) leaking from a known line: the top leak names it.

leak.py runs 5 steps; step k holds 4(k-1) MiB, allocates 1 MiB scratch (4k-3), keeps 4 MiB (4k+1),
frees the scratch (4k). Device 0: peak 4*5+1 = 21 MiB = 22020096. The 5 kept buffers are freed while
the interpreter finalizes, so the trace ends at 0 bytes after 10 allocations and 10 frees, plus the
PYTHON_FINALIZING marker before those last frees (21 events). Live at exit (when finalization starts):
5 x 4 MiB = 20971520 bytes, all allocated by the line marked "marker: leak" (through the line marked
"marker: cudaMalloc call"): one call site, under every CPython version.
trace.python_version is the interpreter's own version as it writes it (platform.python_version(): "3.12.1").
"""
import subprocess

import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
script = case.source("leak.py")
leak_line = e2e_lib.marker_line(script, "marker: leak")
malloc_line = e2e_lib.marker_line(script, "marker: cudaMalloc call")
_, trace = case.run_traced([case.args.python, script])
summary = case.analyze("summary", trace)
case.check_health(summary, 21)
version = subprocess.run([case.args.python, "-c", "import platform; print(platform.python_version())"],
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
case.check("trace.python_version", version, summary.get("trace", {}).get("python_version"))
case.check_devices(summary, {
    0: {"peak_driver_bytes": 21 * MIB, "final_driver_bytes": 0,
        "driver_allocations": 10, "driver_frees": 10},
})
leaks = case.analyze("leaks", trace)["leaks"]
top = leaks[0]["frames"] if leaks else []
case.check(f"leaks[0].frames has leak.py:{leak_line}", True, e2e_lib.has_frame(top, "leak.py", leak_line))
case.check(f"leaks[0].frames has leak.py:{malloc_line}", True, e2e_lib.has_frame(top, "leak.py", malloc_line))
# The 5 kept blocks are one call site under every CPython version: 3.13 calls DeviceBuffer through
# slot_tp_init/type_call the first time and through its specialized path after, stacks that differ only in
# the interpreter's frames (which the reports hide), so memtrace shows them as one site of 5 x 4 MiB.
sites = [s for s in leaks if e2e_lib.has_frame(s["frames"], "leak.py", leak_line)]
case.check("sites live at exit from the leak line", 1, len(sites))
case.check("bytes live at exit from the leak line", 20 * MIB, sum(s["bytes"] for s in sites))
case.check("allocations live at exit from the leak line", 5, sum(s["count"] for s in sites))
case.check("sites live at exit not from the leak line", 0, len(leaks) - len(sites))
case.finish()
