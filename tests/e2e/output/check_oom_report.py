"""`memtrace oom` on a driver-level OOM (the `oom` program): one device of 64 MiB (67108864 bytes), 40 MiB
(41943040) held by main's cudaMalloc, then 100 MiB (104857600) requested in request_too_much while
64 - 40 = 24 MiB (25165824) are free.

Facts: this process's allocated = reserved = driver = 40 MiB (no allocator layer); one live call site (the
40 MiB allocation, from main); no growth (one allocation). The hook's DEVICE_USAGE right after the failure
holds cuMemGetInfo's 24 MiB free of 64 MiB, and no per-process figures (the test double's NVML is not on the
library path here); accounted = the driver total, 40 MiB.
Diagnosis: 100 MiB > 64 MiB, the request alone exceeds the device. Allocated 40 / 64 = 62% < 80% (not
"live tensors"), reserved - allocated = 0 (not fragmentation), no other-process figures.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("oom")],
                           {"FAKECUDA_TOTAL_BYTES": str(64 * MIB), "FAKECUDA_DEVICES": "1"})
report = case.analyze("oom", trace)
case.check("oom_count", 1, report.get("oom_count"))
case.check("detailed_count", 1, report.get("detailed_count"))
ooms = report.get("ooms", [])
oom = ooms[0] if ooms else {}
for key, value in {"number": 1, "device": 0, "api": "CUDA_MALLOC", "layer": "LAYER_DRIVER",
                   "requested_bytes": 100 * MIB, "driver_attempts": 0,
                   "device_free_bytes": 24 * MIB, "device_total_bytes": 64 * MIB,
                   "allocated_bytes": 40 * MIB, "reserved_bytes": 40 * MIB, "driver_bytes": 40 * MIB,
                   "allocator_layer": False, "live_call_site_count": 1, "growing_call_site_count": 0}.items():
    case.check(f"ooms[0].{key}", value, oom.get(key))
case.check("ooms[0].frames has request_too_much", True,
           e2e_lib.has_frame(oom.get("frames", []), None, None, "request_too_much"))
usage = oom.get("device_usage") or {}
case.check("ooms[0].device_usage", {"api": "CUDA_MALLOC", "after_oom": True, "device_free_bytes": 24 * MIB,
                                    "device_total_bytes": 64 * MIB, "process_used_bytes": None,
                                    "other_processes_used_bytes": None, "accounted_bytes": 40 * MIB,
                                    "context_and_unattributed_bytes": None},
           {k: v for k, v in usage.items() if k != "time_s"})
case.check("ooms[0].fragmentation", {"reserved_minus_allocated_bytes": 0, "segments_known": False,
                                     "segment_count": None, "largest_free_block_bytes": None},
           oom.get("fragmentation"))
live = oom.get("live_call_sites", [])
first_live = live[0] if live else {}
case.check("ooms[0].live_call_sites[0].bytes", 40 * MIB, first_live.get("bytes"))
case.check("ooms[0].live_call_sites[0].count", 1, first_live.get("count"))
case.check("ooms[0].live_call_sites[0] is main's, not request_too_much's", (True, False),
           (e2e_lib.has_frame(first_live.get("frames", []), None, None, "main"),
            e2e_lib.has_frame(first_live.get("frames", []), None, None, "request_too_much")))
case.check("ooms[0].diagnoses", [{"cause": "request_exceeds_device",
                                  "text": "the request alone is larger than the device: 100.00 MiB requested, "
                                          "the device has 64.00 MiB in all"}],
           oom.get("diagnoses"))
case.finish()
