"""JAX-style driver calls: entry points from dlsym on a libcuda.so.1 handle, and the four-argument
cuGetProcAddress obtained the same way.

Sequence of driver_dlsym.cc (MiB = 1048576); no pool or allocator blocks, so allocated = reserved = driver:
  device 1 (physical memory created with location.id = 1 while device 0 is current):
    cuMemCreate 4 MiB -> 4;  cuMemCreate 2 MiB -> 6 (peak);  map, set access, unmap (address space only);
    cuMemRelease of the 4 MiB handle -> 2.   Peak 6291456, final 2097152; 2 allocations, 1 free.
  device 0: x = 1 MiB (cuMemAlloc from the resolver) -> 1;  y = 3 MiB (cuMemAlloc_v2 from dlsym) -> 4 (peak);
    free x (cuMemFree from the resolver) -> 3.   Peak 4194304, final 3145728; 2 allocations, 1 free.
Live at exit: y (3 MiB) then the 2 MiB physical allocation.
"""
import e2e_lib
from e2e_lib import MIB

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("driver_dlsym")])
summary = case.analyze("summary", trace)
# 2 creates, 1 reserve, 2 maps, 1 unmap, 1 release, 1 address free, 2 allocations, 1 free
case.check_health(summary, 11)
case.check_devices(summary, {
    0: {"peak_driver_bytes": 4 * MIB, "final_driver_bytes": 3 * MIB,
        "peak_allocated_bytes": 4 * MIB, "final_allocated_bytes": 3 * MIB,
        "peak_reserved_bytes": 4 * MIB, "final_reserved_bytes": 3 * MIB,
        "driver_allocations": 2, "driver_frees": 1},
    1: {"peak_driver_bytes": 6 * MIB, "final_driver_bytes": 2 * MIB,
        "peak_allocated_bytes": 6 * MIB, "final_allocated_bytes": 2 * MIB,
        "peak_reserved_bytes": 6 * MIB, "final_reserved_bytes": 2 * MIB,
        "driver_allocations": 2, "driver_frees": 1},
})
leaks = case.analyze("leaks", trace)["leaks"]
case.check("leak sites", 2, len(leaks))
case.check("leaks[0].bytes", 3 * MIB, leaks[0]["bytes"] if leaks else None)
case.check("leaks[1].bytes", 2 * MIB, leaks[1]["bytes"] if len(leaks) > 1 else None)
case.finish()
