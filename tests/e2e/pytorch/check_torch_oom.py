"""An OOM inside PyTorch's allocator layer (torch_allocator oom), on a device of 1 GiB = 1073741824 bytes.

A 1000-byte request takes a 1024-byte block of a new 2 MiB (2097152) segment; then 2 GiB (2147483648,
already a multiple of 512 and of 2 MiB, so block and segment are both 2147483648 bytes) cannot be had:
the segment's cudaMalloc fails while 1073741824 - 2097152 = 1071644672 bytes are free, and the
allocator calls c10::reportOutOfMemoryToProfiler, which memtrace must forward to libc10.so.
Whichever layer's record comes first, the first OOM has that request, device and free memory.
"""
import json

import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
stdout, trace = case.run_traced([case.program("torch_allocator"), "oom"])
own = json.loads(stdout.strip().splitlines()[-1])
case.check("libc10 reportOutOfMemoryToProfiler calls (memtrace forwarded)", 1, own["out_of_memory_calls"])
case.check("libc10 reportMemoryUsageToProfiler calls (memtrace forwarded)", 1, own["memory_usage_calls"])

summary = case.analyze("summary", trace)
ooms = summary.get("ooms", [])
print(f"info: {len(ooms)} OOM record(s): {[(o.get('requested_bytes'), o.get('device')) for o in ooms]}")
first = ooms[0] if ooms else {}
case.check("ooms[0].requested_bytes", 2 << 30, first.get("requested_bytes"))
case.check("ooms[0].device", 0, first.get("device"))
case.check("ooms[0].device_free_bytes", (1 << 30) - 2 * MIB, first.get("device_free_bytes"))
case.check_devices(summary, {
    0: {"peak_allocated_bytes": 1024, "peak_reserved_bytes": 2 * MIB, "peak_driver_bytes": 2 * MIB,
        "final_allocated_bytes": 1024, "allocator_layer": True},
})
case.finish()
