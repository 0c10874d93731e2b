"""`memtrace oom` on a fragmentation OOM (the `oom_fragmented` program, one device of 8 MiB = 8388608 bytes):
four 2 MiB (2097152) tensors in four 2 MiB segments, the first and third freed, then 3 MiB (3145728) asked
for; the allocator's cudaMalloc of a 4 MiB segment fails (0 bytes free) and it reports the OOM.

One failure (the failed cudaMalloc folded into PyTorch's OOM). At it: allocated 2 x 2 = 4 MiB, reserved =
driver = 4 x 2 = 8 MiB; reserved - allocated = 4 MiB >= the 3 MiB requested, but the four segments are each
either full or one free 2 MiB block: largest free block 2 MiB < 3 MiB -> fragmentation. Alone: 3 MiB <= the
8 MiB device, allocated 4 / 8 = 50% < 80%, two live tensors of one call site (< 3: no growth), no NVML.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("oom_fragmented")],
                           {"FAKECUDA_TOTAL_BYTES": str(8 * MIB), "FAKECUDA_DEVICES": "1"})
report = case.analyze("oom", trace)
case.check("oom_count", 1, report.get("oom_count"))
ooms = report.get("ooms", [])
oom = ooms[0] if ooms else {}
for key, value in {"api": "TORCH_ALLOCATOR", "requested_bytes": 3 * MIB, "driver_attempts": 1,
                   "device_free_bytes": 0, "device_total_bytes": 8 * MIB, "allocated_bytes": 4 * MIB,
                   "reserved_bytes": 8 * MIB, "driver_bytes": 8 * MIB, "live_call_site_count": 1,
                   "growing_call_site_count": 0}.items():
    case.check(f"ooms[0].{key}", value, oom.get(key))
case.check("ooms[0].frames has tensor", True, e2e_lib.has_frame(oom.get("frames", []), None, None, "tensor"))
live = oom.get("live_call_sites", [])
case.check("ooms[0].live_call_sites bytes and count", [(4 * MIB, 2)],
           [(s.get("bytes"), s.get("count")) for s in live])
case.check("ooms[0].fragmentation", {"reserved_minus_allocated_bytes": 4 * MIB, "segments_known": True,
                                     "segment_count": 4, "largest_free_block_bytes": 2 * MIB},
           oom.get("fragmentation"))
case.check("ooms[0].diagnoses", [{
    "cause": "fragmentation",
    "text": "fragmentation: 4.00 MiB reserved but unallocated, largest free block 2.00 MiB < the 3.00 MiB requested; "
            "as PyTorch's own message says, setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids "
            "fragmentation"}], oom.get("diagnoses"))
case.finish()
