"""`memtrace oom` on an OOM inside PyTorch's allocator layer (torch_allocator oom), device of 1 GiB
(1073741824 bytes): a 1000-byte request takes a 1024-byte block at the start of a new 2 MiB (2097152)
segment; then 2 GiB (2147483648) is requested: the segment's cudaMalloc fails while 1073741824 - 2097152 =
1071644672 bytes are free, and the allocator reports the OOM to c10::reportOutOfMemoryToProfiler.

One failure, not two: the failed cudaMalloc is folded into PyTorch's OOM (driver_attempts 1), even with the
DEVICE_USAGE sample the hook records right after each failure. At the failure: allocated 1024, reserved =
driver = 2097152; one segment whose largest free block is its tail, 2097152 - 1024 = 2096128 bytes, which is
also reserved - allocated. Diagnosis: 2 GiB > 1 GiB, the request alone exceeds the device; allocated is far
below 80% of the device, and 2096128 < 2147483648 (not fragmentation).
"""
import e2e_lib
from e2e_lib import MIB

GIB = 1 << 30
case = e2e_lib.Case()
_, trace = case.run_traced([case.program("torch_allocator"), "oom"])
report = case.analyze("oom", trace)
case.check("oom_count", 1, report.get("oom_count"))
ooms = report.get("ooms", [])
oom = ooms[0] if ooms else {}
for key, value in {"device": 0, "api": "TORCH_ALLOCATOR", "layer": "LAYER_BLOCK", "requested_bytes": 2 * GIB,
                   "driver_attempts": 1, "device_free_bytes": GIB - 2 * MIB, "device_total_bytes": GIB,
                   "allocated_bytes": 1024, "reserved_bytes": 2 * MIB, "driver_bytes": 2 * MIB,
                   "allocator_layer": True, "live_call_site_count": 1, "growing_call_site_count": 0}.items():
    case.check(f"ooms[0].{key}", value, oom.get(key))
case.check("ooms[0].fragmentation", {"reserved_minus_allocated_bytes": 2 * MIB - 1024, "segments_known": True,
                                     "segment_count": 1, "largest_free_block_bytes": 2 * MIB - 1024},
           oom.get("fragmentation"))
case.check("ooms[0].diagnoses causes", ["request_exceeds_device"],
           [d.get("cause") for d in oom.get("diagnoses", [])])
case.finish()
