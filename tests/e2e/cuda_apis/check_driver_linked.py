"""A program linked with -lcuda: exported driver functions, pitched, managed and pool allocations.

Sequence of driver_linked.cc on device 0 (MiB = 1048576), driver / allocated bytes; the first event is a
pool block, so allocated = live pool blocks; reserved = driver = driver-layer bytes + the pool's latest
POOL_RESERVED sample (2 MiB from the first block on: the pool keeps its memory, nothing synchronizes);
managed memory is never charged:
  pooled = 2 MiB async -> pool 2, driver 2, allocated 2;  big = 5 MiB -> 7, 2;  pitched 300 x 10 -> pitch
  512, 5120 bytes -> 7340032 + 5120 = 7345152 (peak), 2;  managed 7 MiB -> unchanged;  free pooled ->
  7345152, 0;  free big -> 2097152 + 5120 = 2102272, 0;  free managed -> unchanged.
  2 driver allocations (big, pitched) + 1 free; 1 block allocation + 1 free; 1 pool sample.
Live at exit: the pitched allocation only.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("driver_linked")])
summary = case.analyze("summary", trace)
case.check_health(summary, 8)  # 4 allocations (managed too) + 3 frees + 1 pool sample
case.check_devices(summary, {
    0: {"peak_driver_bytes": 7 * MIB + 5120, "final_driver_bytes": 2 * MIB + 5120,
        "peak_allocated_bytes": 2 * MIB, "final_allocated_bytes": 0,
        "peak_reserved_bytes": 7 * MIB + 5120, "final_reserved_bytes": 2 * MIB + 5120,
        "driver_allocations": 2, "driver_frees": 1, "block_allocations": 1, "block_frees": 1},
})
leaks = case.analyze("leaks", trace)["leaks"]
case.check("leak sites", 1, len(leaks))
case.check("leaks[0].bytes", 5120, leaks[0]["bytes"] if leaks else None)
case.finish()
