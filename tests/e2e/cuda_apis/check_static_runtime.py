"""Static hidden runtime: its allocations reach the tracer only through the driver resolver.

Sequence of static_runtime.cc on device 0 (MiB = 1048576), driver / allocated bytes; device 0's first
event is a pool block, so allocated = live pool blocks throughout; reserved = driver = driver-layer bytes +
the pool's latest POOL_RESERVED sample (the double rounds a pool up to 2 MiB and shrinks it only at a
synchronization, which this program does not make):
  p = 1 MiB async -> pool 2, driver 2, allocated 1;  a = 3 MiB -> 5, 1;  q = 2 MiB async (ptsz) -> pool 4,
  driver 7 (peak), allocated 3 (peak);  free a -> 4, 3;  cudaFree(p) (pool block through cuMemFree) -> 4, 2;
  pitched 1000 x 100 -> pitch 1024, 102400 bytes -> 4194304 + 102400 = 4296704, 2;  free q -> 4296704, 0
  peak driver 7 MiB = 7340032, final 4296704; peak allocated 3 MiB = 3145728, final 0.
  allocations: 2 driver (a, pitched), 2 block (p, q); 3 frees in all (a; p and q as blocks); 2 pool samples.
Live at exit: the pitched allocation only.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("static_runtime")])
summary = case.analyze("summary", trace)
case.check_health(summary, 9)  # 4 allocations + 3 frees + 2 pool samples
case.check_devices(summary, {
    0: {"peak_driver_bytes": 7 * MIB, "final_driver_bytes": 4 * MIB + 102400,
        "peak_allocated_bytes": 3 * MIB, "final_allocated_bytes": 0,
        "peak_reserved_bytes": 7 * MIB, "final_reserved_bytes": 4 * MIB + 102400,
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
