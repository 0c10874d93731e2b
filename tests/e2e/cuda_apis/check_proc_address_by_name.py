"""tests/e2e/cuda_apis/proc_address_by_name.cc: cuMemAlloc as cuGetProcAddress_v2 and cuGetProcAddress, called by name,
hand it out after the program looked both up in the global scope, where the tracer's exports come first. Every
allocation is recorded with its free: ALLOC 1 MiB, FREE, ALLOC 2 MiB, FREE, all CU_MEM_ALLOC / CU_MEM_FREE on
device 0. Without the check that a global-scope lookup found the tracer's own function, both ALLOCs were
missing and only the FREEs recorded.
"""
import e2e_lib

MIB = 1 << 20

case = e2e_lib.Case()
_, trace = case.run_traced([case.program("proc_address_by_name")])
events = case.dump_events(trace)
memory = [(e["kind"], e["api"], e["size"]) for e in events if e["kind"] in ("ALLOC", "FREE")]
case.check("allocations and frees in order",
           [("ALLOC", "CU_MEM_ALLOC", MIB), ("FREE", "CU_MEM_FREE", 0),
            ("ALLOC", "CU_MEM_ALLOC", 2 * MIB), ("FREE", "CU_MEM_FREE", 0)], memory)
case.finish()
