"""A stream of device 1 used while device 0 is current: each block is device 1's, device 0 never has memory.

Sequence of two_device_streams.cc (MiB = 1048576 bytes); no PyTorch blocks, so allocated = live pool blocks and
reserved = driver = device 1's default pool, sampled after each allocation (written when it changed):
  device 1: p = 128 MiB on the stream (device 1 current) -> allocated 128, pool 128 (sampled);
            free p on the stream (device 0 current) -> allocated 0, pool 128 (the double keeps a pool's memory
            until a synchronization of the driver, and the program makes none);
            q = 64 MiB on the stream (device 0 current) -> allocated 64, pool 128 (unchanged: no sample);
            free q -> allocated 0.
    peak allocated 128 MiB = 134217728 at event 0, final 0; reserved = driver: peak and final 128 MiB;
    0 driver allocations, 2 block allocations, 2 block frees.
  device 0: nothing (charging q to the current device would put 64 MiB there).
Events: 2 allocations + 2 frees + 1 pool sample = 5.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("two_device_streams")])
summary = case.analyze("summary", trace)
case.check_health(summary, 5)
case.check_devices(summary, {
    1: {"peak_allocated_bytes": 128 * MIB, "final_allocated_bytes": 0,
        "peak_reserved_bytes": 128 * MIB, "final_reserved_bytes": 128 * MIB,
        "peak_driver_bytes": 128 * MIB, "final_driver_bytes": 128 * MIB,
        "driver_allocations": 0, "driver_frees": 0, "block_allocations": 2, "block_frees": 2},
})
case.check("devices in the summary", [1], sorted(d["device"] for d in summary.get("devices", [])))
case.finish()
