"""Explicit pools and managed memory through the dynamic runtime (MiB = 1048576).

Every charged event is a pool block, so on each device allocated = driver = live pool blocks and
reserved = driver; managed memory is never charged. Device 0 is current throughout.
  device 1 (pool1): x = 3 MiB -> 3;  z = 2 MiB -> 5 (peak);  cudaFree(x) -> 2.
    Peak 5242880, final 2097152; 2 block allocations, 1 free.
  device 0 (pool0, per-thread stream entry point): y = 1 MiB -> 1 (peak);  free y -> 0.
    Peak 1048576, final 0; 1 block allocation, 1 free.
Events: x, y, z, managed, 3 frees = 7. Live at exit: z only.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("runtime_pools")])
summary = case.analyze("summary", trace)
case.check_health(summary, 7)
case.check_devices(summary, {
    0: {"peak_driver_bytes": 1 * MIB, "final_driver_bytes": 0,
        "peak_allocated_bytes": 1 * MIB, "final_allocated_bytes": 0,
        "peak_reserved_bytes": 1 * MIB, "final_reserved_bytes": 0,
        "driver_allocations": 0, "block_allocations": 1, "block_frees": 1},
    1: {"peak_driver_bytes": 5 * MIB, "final_driver_bytes": 2 * MIB,
        "peak_allocated_bytes": 5 * MIB, "final_allocated_bytes": 2 * MIB,
        "peak_reserved_bytes": 5 * MIB, "final_reserved_bytes": 2 * MIB,
        "driver_allocations": 0, "block_allocations": 2, "block_frees": 1},
})
leaks = case.analyze("leaks", trace)["leaks"]
case.check("leak sites", 1, len(leaks))
case.check("leaks[0].bytes", 2 * MIB, leaks[0]["bytes"] if leaks else None)
case.finish()
