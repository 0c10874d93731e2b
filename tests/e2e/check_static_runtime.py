"""Static hidden runtime: its allocations reach the tracer only through the driver resolver.

Sequence of static_runtime.cc on device 0 (MiB = 1048576), driver / allocated bytes; device 0's first
event is a pool block, so allocated = live pool blocks throughout; reserved = driver:
  p = 1 MiB async -> 1, 1;  a = 3 MiB -> 4, 1;  q = 2 MiB async (ptsz) -> 6 (peak), 3 (peak);
  free a -> 3, 3;  cudaFree(p) (pool block through cuMemFree) -> 2, 2;
  pitched 1000 x 100 -> pitch 1024, 102400 bytes -> 2097152 + 102400 = 2199552, 2;  free q -> 102400, 0
  peak driver 6 MiB = 6291456, final 102400; peak allocated 3 MiB = 3145728, final 0.
  allocations: 2 driver (a, pitched), 2 block (p, q); 3 frees in all (a; p and q as blocks).
Live at exit: the pitched allocation only.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("static_runtime")])
summary = case.analyze("summary", trace)
case.check_health(summary, 7)  # 4 allocations + 3 frees
case.check_devices(summary, {
    0: {"peak_driver_bytes": 6 * MIB, "final_driver_bytes": 102400,
        "peak_allocated_bytes": 3 * MIB, "final_allocated_bytes": 0,
        "peak_reserved_bytes": 6 * MIB, "final_reserved_bytes": 102400,
        "driver_allocations": 2, "block_allocations": 2},
})
device0 = next((d for d in summary.get("devices", []) if d.get("device") == 0), {})
case.check("device 0 driver_frees + block_frees", 3,
           device0.get("driver_frees", 0) + device0.get("block_frees", 0))

leaks = case.analyze("leaks", trace)["leaks"]
case.check("leak sites", 1, len(leaks))
case.check("leaks[0].bytes", 102400, leaks[0]["bytes"] if leaks else None)
case.check("leaks[0].frames has main of static_runtime.cc", True,
           bool(leaks) and e2e_lib.has_frame(leaks[0]["frames"], "static_runtime.cc", None, "main"))
case.finish()
