"""Explicit pools and managed memory through the dynamic runtime (MiB = 1048576).

Every charged event is a pool block: allocated = live pool blocks; reserved = driver = each pool's
latest POOL_RESERVED sample (the double grows a pool to its used bytes rounded up to 2 MiB, and nothing
here synchronizes, so no pool shrinks); managed memory is never charged. Device 0 is current throughout.
  device 1 (pool1): x = 3 MiB -> allocated 3, reserved 4;  z = 2 MiB -> allocated 5 (peak), reserved 6
    (peak);  cudaFree(x) -> allocated 2, reserved 6.
    Allocated peak 5242880, final 2097152; reserved peak = final 6291456; 2 block allocations, 1 free.
  device 0 (pool0, per-thread stream entry point): y = 1 MiB -> allocated 1, reserved 2;  free y ->
    allocated 0, reserved 2.
    Allocated peak 1048576, final 0; reserved peak = final 2097152; 1 block allocation, 1 free.
Events: x, y, z, managed, 3 frees, and 3 pool samples (4 and 6 MiB of pool1, 2 MiB of pool0) = 10.
Live at exit: z only.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("runtime_pools")])
summary = case.analyze("summary", trace)
case.check_health(summary, 10)
case.check_devices(summary, {
    0: {"peak_driver_bytes": 2 * MIB, "final_driver_bytes": 2 * MIB,
        "peak_allocated_bytes": 1 * MIB, "final_allocated_bytes": 0,
        "peak_reserved_bytes": 2 * MIB, "final_reserved_bytes": 2 * MIB,
        "driver_allocations": 0, "block_allocations": 1, "block_frees": 1},
    1: {"peak_driver_bytes": 6 * MIB, "final_driver_bytes": 6 * MIB,
        "peak_allocated_bytes": 5 * MIB, "final_allocated_bytes": 2 * MIB,
        "peak_reserved_bytes": 6 * MIB, "final_reserved_bytes": 6 * MIB,
        "driver_allocations": 0, "block_allocations": 2, "block_frees": 1},
})
leaks = case.analyze("leaks", trace)["leaks"]
case.check("leak sites", 1, len(leaks))
case.check("leaks[0].bytes", 2 * MIB, leaks[0]["bytes"] if leaks else None)
case.finish()
