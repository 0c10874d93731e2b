"""PyTorch's allocator layer through the fake libc10.so / libc10_cuda.so (rules in
tests/fakecuda/c10_cuda_allocator.h; MiB = 1048576).

Blocks on device 0, allocated / reserved after each step (reports carry these totals):
  b1 1000 -> 1024-byte block, new 2 MiB small segment:      1024 / 2097152
  b2 3 MiB -> new 4 MiB segment:                           3146752 / 6291456
  b3 500000 -> 500224 (977 * 512) from the small segment:  3646976 / 6291456
  free b2:                                                  501248 / 6291456
  b4 3 MiB reuses b2's block:                              3646976 / 6291456
  b5 5 MiB -> new 6 MiB segment:                           8889856 / 12582912   (both peaks)
  free b5, free b4:                                         501248 / 12582912
  empty_cache: the 4 and 6 MiB segments are freed (no report; reserved is now 2097152)
  b6 1000 -> 1024 from the small segment's tail:            502272 / 2097152
  free b1:                                                  501248 / 2097152
Device 1: b7 2048 -> new 2 MiB segment: 2048 / 2097152; free b7: 0 / 2097152.
Driver level: segments of 2 + 4 + 6 MiB = 12582912 at the peak, 2 MiB left on each device at exit.
Hook calls: 7 block allocations + 5 frees = 12, net +501248 bytes (device 0's final allocated).
The segment's cudaMalloc comes before the first block report of a device; peak allocated must still be
the allocator's own maximum (2048 on device 1, not the 2 MiB segment).
"""
import json

import e2e_lib

case = e2e_lib.Case()
stdout, trace = case.run_traced([case.program("torch_allocator")])
own = json.loads(stdout.strip().splitlines()[-1])
case.check("libc10 reportMemoryUsageToProfiler calls (memtrace forwarded)", 12, own["memory_usage_calls"])
case.check("libc10 reportOutOfMemoryToProfiler calls", 0, own["out_of_memory_calls"])
case.check("libc10 net alloc bytes", 501248, own["net_alloc_bytes"])
case.check("allocator device 0 max allocated", 8889856, own["device0"]["max_allocated_bytes"])
case.check("allocator device 0 max reserved", 12582912, own["device0"]["max_reserved_bytes"])
case.check("allocator device 1 max allocated", 2048, own["device1"]["max_allocated_bytes"])

summary = case.analyze("summary", trace)
# 7 block allocations + 5 block frees + 4 segment allocations + 2 segment frees
case.check_health(summary, 18)
case.check_devices(summary, {
    0: {"peak_allocated_bytes": own["device0"]["max_allocated_bytes"],
        "peak_reserved_bytes": own["device0"]["max_reserved_bytes"],
        "peak_driver_bytes": 12582912,
        "final_allocated_bytes": own["device0"]["allocated_bytes"],  # 501248
        "final_reserved_bytes": own["device0"]["reserved_bytes"],    # 2097152
        "final_driver_bytes": 2097152,
        "block_allocations": 6, "block_frees": 4, "driver_allocations": 3, "driver_frees": 2,
        "allocator_layer": True},
    1: {"peak_allocated_bytes": own["device1"]["max_allocated_bytes"],  # 2048
        "peak_reserved_bytes": own["device1"]["max_reserved_bytes"],    # 2097152
        "peak_driver_bytes": 2097152,
        "final_allocated_bytes": 0, "final_reserved_bytes": 2097152, "final_driver_bytes": 2097152,
        "block_allocations": 1, "block_frees": 1, "driver_allocations": 1, "driver_frees": 0,
        "allocator_layer": True},
})
case.finish()
