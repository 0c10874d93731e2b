"""A CPython without a frame reader in memtrace (3.10: run with --python): the trace says so once
(Notice PYTHON_UNSUPPORTED, naming the interpreter's version), stacks hold native frames only, and the
leak is still found with exact figures.

leak_unfreed.py on device 0 (MiB = 1048576), cudaMalloc/cudaFree only, so allocated = reserved =
driver bytes. Step k (k = 1..3) starts holding 3(k-1) MiB, allocates 1 MiB scratch -> 3k - 2, keeps
3 MiB -> 3k + 1, frees the scratch -> 3k.
  peak at step 3: 3*3 + 1 = 10 MiB = 10485760; final 3*3 = 9 MiB = 9437184;
  6 driver allocations (3 scratch + 3 kept), 3 frees (the scratches); the kept 3 are never freed.
  Live at exit: 3 x 3 MiB = 9437184 bytes in 3 allocations, every one from the line marked
  "marker: leak"; with native frames only memtrace cannot tell that line from the scratch line, so
  the figures are summed over all leak sites (all that is live at exit is the kept buffers).
No frame of any stack may name a .py file: the frame reader must not have run.
"""
import subprocess

import e2e_lib
from e2e_lib import MIB

NOTICE = "PYTHON_UNSUPPORTED"

case = e2e_lib.Case()
version = subprocess.run([case.args.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
print(f"interpreter {case.args.python} is CPython {version}")

_, trace = case.run_traced([case.args.python, case.source("leak_unfreed.py")])
summary = case.analyze("summary", trace)
trace_info = summary.get("trace", {})
case.check("trace.truncated", False, trace_info.get("truncated"))
case.check("trace.unknown_frees", 0, trace_info.get("unknown_frees"))
case.check("trace.double_frees", 0, trace_info.get("double_frees"))
case.check("trace.python_version (no frame reader: null)", None, trace_info.get("python_version"))
case.check_devices(summary, {
    0: {"peak_driver_bytes": 10 * MIB, "final_driver_bytes": 9 * MIB,
        "peak_allocated_bytes": 10 * MIB, "final_allocated_bytes": 9 * MIB,
        "driver_allocations": 6, "driver_frees": 3, "block_allocations": 0, "block_frees": 0},
})
notices = trace_info.get("notices") or []
case.check("notice codes", [NOTICE], [n.get("code") for n in notices])
message = notices[0].get("message", "") if notices else ""
print(f"notice message: {message!r}")
case.check(f"the notice's message names CPython {version}", True, version in message)

leaks = case.analyze("leaks", trace)["leaks"]
case.check("bytes live at exit, all sites", 9 * MIB, sum(s["bytes"] for s in leaks))
case.check("allocations live at exit, all sites", 3, sum(s["count"] for s in leaks))
top = leaks[0]["frames"] if leaks else []
case.check("leaks[0] has native frames", True, len(top) > 0)
case.check("leaks[0].frames reaches the runtime through ctypes (_ctypes_callproc)", True,
           e2e_lib.has_frame(top, function_part="_ctypes_callproc"))
python_frames = [f for s in leaks for f in s["frames"] if str(f.get("file", "")).endswith(".py")]
case.check("frames naming a .py file, all leak sites", [], python_frames)
case.finish()
