"""Dynamic runtime on two devices: exact peaks, finals and counts per device; each allocation once.

Sequence of runtime_two_devices.cc (MiB = 1048576 bytes), per device, driver / allocated bytes:
  device 0 (only cudaMalloc, so allocated = reserved = driver):
    a = 4 MiB -> 4;  b = 8 MiB -> 12 (peak);  free b (device 1 current) -> 4;  d = 6 MiB -> 10;  free a -> 6
    peak 12 MiB = 12582912, final 6 MiB = 6291456; 3 driver allocations, 2 frees.
  device 1 (first event a pool block, so allocated = live pool blocks from the start; reserved = driver =
  driver-layer bytes + the pool's latest POOL_RESERVED sample, which the double rounds up to 2 MiB and only
  shrinks at a synchronization of the driver: cudaDeviceSynchronize of the fake runtime makes none):
    p = 1 MiB async -> pool 2, driver 2, allocated 1;  c = 16 MiB -> 18, 1;  q = 2 MiB async -> pool 4,
    driver 20, allocated 3;  free p -> 20, 2;  free c -> 4, 2
    driver peak 20 MiB = 20971520, final 4 MiB = 4194304; allocated peak 3 MiB = 3145728, final 2097152;
    1 driver allocation + 1 free, 2 block allocations + 1 free, 2 pool samples.
The runtime allocates through cuMemAlloc_v2 from the resolver: counting both layers would double device 0.
Live at exit: d (6 MiB, allocated in allocate_kept_block) and q (2 MiB), largest first.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("runtime_two_devices")])
summary = case.analyze("summary", trace)
case.check_health(summary, 12)  # 6 allocations + 4 frees + 2 pool samples
case.check_devices(summary, {
    0: {"peak_driver_bytes": 12 * MIB, "final_driver_bytes": 6 * MIB,
        "peak_allocated_bytes": 12 * MIB, "final_allocated_bytes": 6 * MIB,
        "peak_reserved_bytes": 12 * MIB, "final_reserved_bytes": 6 * MIB,
        "driver_allocations": 3, "driver_frees": 2, "block_allocations": 0, "block_frees": 0},
    1: {"peak_driver_bytes": 20 * MIB, "final_driver_bytes": 4 * MIB,
        "peak_allocated_bytes": 3 * MIB, "final_allocated_bytes": 2 * MIB,
        "peak_reserved_bytes": 20 * MIB, "final_reserved_bytes": 4 * MIB,
        "driver_allocations": 1, "driver_frees": 1, "block_allocations": 2, "block_frees": 1},
})
case.check("ooms", [], summary.get("ooms"))

leaks = case.analyze("leaks", trace)["leaks"]
case.check("leak sites", 2, len(leaks))
case.check("leaks[0].bytes", 6 * MIB, leaks[0]["bytes"] if leaks else None)
case.check("leaks[0].count", 1, leaks[0]["count"] if leaks else None)
case.check("leaks[1].bytes", 2 * MIB, leaks[1]["bytes"] if len(leaks) > 1 else None)
kept_line = e2e_lib.marker_line(case.source("runtime_two_devices.cc"), "the largest leak")
case.check(f"leaks[0].frames has allocate_kept_block at runtime_two_devices.cc:{kept_line}", True,
           bool(leaks) and e2e_lib.has_frame(leaks[0]["frames"], "runtime_two_devices.cc", kept_line,
                                             "allocate_kept_block"))
case.finish()
