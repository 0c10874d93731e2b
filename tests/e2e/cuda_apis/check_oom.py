"""An OOM: with one device of 64 MiB (67108864 bytes), 40 MiB (41943040) are held when 100 MiB
(104857600) are requested; free memory at that moment is 64 - 40 = 24 MiB = 25165824 bytes.
The runtime's failed cudaMalloc and the driver's failed cuMemAlloc under it are one OOM, followed by the
device's DEVICE_USAGE sample taken right after it (without NVML here: cuMemGetInfo's free/total only).
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("oom")],
                           {"FAKECUDA_TOTAL_BYTES": str(64 * MIB), "FAKECUDA_DEVICES": "1"})
summary = case.analyze("summary", trace)
case.check_health(summary, 4)  # allocation, OOM, its DEVICE_USAGE, free
ooms = summary.get("ooms", [])
case.check("oom events", 1, len(ooms))
first = ooms[0] if ooms else {}
case.check("ooms[0].requested_bytes", 100 * MIB, first.get("requested_bytes"))
case.check("ooms[0].device", 0, first.get("device"))
case.check("ooms[0].device_free_bytes", 24 * MIB, first.get("device_free_bytes"))
case.check("ooms[0].frames has request_too_much", True,
           e2e_lib.has_frame(first.get("frames", []), None, None, "request_too_much"))
case.check_devices(summary, {
    0: {"peak_driver_bytes": 40 * MIB, "final_driver_bytes": 0, "driver_allocations": 1, "driver_frees": 1},
})
case.finish()
