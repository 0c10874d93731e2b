"""The injected tracer's sources in a job started without memtrace (injected_sources.cc; MiB = 1048576).

The program allocates 4 MiB (`before`) and a 1 MiB PyTorch block (`block_before`, in a new 2 MiB segment) untraced,
loads the tracer, switches its sources on, and then, traced (one event each, in this order):
  cudaMalloc 8 MiB `during`         ALLOC  CU_MEM_ALLOC  driver  8388608   (CUPTI: cuMemAlloc_v2 at API exit)
  cudaFree(before)                  FREE   CU_MEM_FREE   driver  4194304   (API entry; the size from the driver,
  cudaFree(during)                  FREE   CU_MEM_FREE   driver  8388608    as the allocation may predate attach)
  c10 malloc 512 KiB                ALLOC  TORCH_ALLOCATOR block 524288  (the patched GOT slot of libc10_cuda.so;
  c10 free(block_before)            FREE   TORCH_ALLOCATOR block 1048576  the segment's tail: no cudaMalloc)
  cuMemCreate 2 MiB                 ALLOC  CU_MEM_CREATE driver 2097152, address = the handle
  cuMemAddressReserve / Map / Unmap / AddressFree of 2 MiB, then cuMemRelease (a free of the handle, size unknown)
  cuMemAllocAsync 1 MiB, cuMemFreeAsync     block layer, the free with its size 1048576
  cuMemHostAlloc 64 KiB, cuMemFreeHost      driver layer, page-locked host memory, the free without a size
then switches them off: a cudaMalloc/cudaFree of 2 MiB and a c10 free after that are not recorded, the GOT slot holds
libc10.so's function again, and no CUPTI callback comes. With --cupti-busy (FAKECUPTI_BUSY=1) another tool holds
CUPTI: the driver layer is off, said in one line, and only the two PyTorch block events are recorded.
The live list: no Python in this program, so no PyTorch snapshot, said in one line.
"""
import glob
import json
import os
import subprocess
import sys

import e2e_lib

MIB = e2e_lib.MIB
MEMORY_KINDS = {"ALLOC", "FREE", "OOM", "MAP", "UNMAP", "ADDRESS_RESERVE", "ADDRESS_FREE"}


def add_arguments(parser):
    parser.add_argument("--injected", required=True, help="libmemtrace-injected-test.so")
    parser.add_argument("--cupti-busy", action="store_true")


case = e2e_lib.Case(add_arguments)
busy = case.args.cupti_busy
env = case.env({"FAKECUPTI_BUSY": "1"} if busy else {})
env.pop("LD_PRELOAD")  # started without memtrace
proc = subprocess.run([case.program("injected_sources"), case.args.injected], env=env, capture_output=True, text=True,
                      timeout=120)
sys.stdout.write(proc.stdout)
sys.stderr.write(proc.stderr)
if proc.returncode != 0:
    sys.exit(f"FAIL: e2e_injected_sources exited with {proc.returncode}")
own = json.loads(proc.stdout.strip().splitlines()[-1])
traces = sorted(glob.glob(os.path.join(case.args.out_dir, "*.mtrace")))
if len(traces) != 1:
    sys.exit(f"FAIL: expected exactly one trace in {case.args.out_dir}, found {traces}")


def event(kind, api, layer, address, size, device=0, memory="MEMORY_DEVICE", handle=0):
    return {"kind": kind, "api": api, "layer": layer, "address": address, "size": size, "device": device,
            "memory": memory, "handle": handle}


block = [
    event("ALLOC", "TORCH_ALLOCATOR", "LAYER_BLOCK", own["block_during"], 524288),
    event("FREE", "TORCH_ALLOCATOR", "LAYER_BLOCK", own["block_before"], MIB),
]
driver_before = [
    event("ALLOC", "CU_MEM_ALLOC", "LAYER_DRIVER", own["during"], 8 * MIB),
    event("FREE", "CU_MEM_FREE", "LAYER_DRIVER", own["before"], 4 * MIB),
    event("FREE", "CU_MEM_FREE", "LAYER_DRIVER", own["during"], 8 * MIB),
]
driver_after = [
    event("ALLOC", "CU_MEM_CREATE", "LAYER_DRIVER", own["handle"], 2 * MIB),
    event("ADDRESS_RESERVE", "CU_MEM_ADDRESS_RESERVE", "LAYER_DRIVER", own["range"], 2 * MIB, device=-1),
    event("MAP", "CU_MEM_MAP", "LAYER_DRIVER", own["range"], 2 * MIB, device=-1, handle=own["handle"]),
    event("UNMAP", "CU_MEM_UNMAP", "LAYER_DRIVER", own["range"], 2 * MIB, device=-1),
    event("ADDRESS_FREE", "CU_MEM_ADDRESS_FREE", "LAYER_DRIVER", own["range"], 2 * MIB, device=-1),
    event("FREE", "CU_MEM_RELEASE", "LAYER_DRIVER", own["handle"], 0, device=-1),
    event("ALLOC", "CU_MEM_ALLOC_ASYNC", "LAYER_BLOCK", own["async_block"], MIB),
    event("FREE", "CU_MEM_FREE_ASYNC", "LAYER_BLOCK", own["async_block"], MIB),
    event("ALLOC", "CU_MEM_HOST_ALLOC", "LAYER_DRIVER", own["host"], 65536, memory="MEMORY_HOST_PINNED"),
    event("FREE", "CU_MEM_FREE_HOST", "LAYER_DRIVER", own["host"], 0, device=-1, memory="MEMORY_DEVICE"),
]
expected = block if busy else driver_before + block + driver_after
measured = [{key: e.get(key) for key in expected[0]} for e in case.dump_events(traces[0]) if e["kind"] in MEMORY_KINDS]
case.check("recorded memory events", len(expected), len(measured))
for i, (want, got) in enumerate(zip(expected, measured)):
    case.check(f"event {i} ({want['kind']} {want['api']})", want, got)

if busy:
    case.check("layers on (torch layer, CUPTI busy)", 6, own["layers"])
    case.check("why the driver layer is off",
               "CUPTI already has a subscriber (CUPTI for fake Kineto): driver layer off, PyTorch layer only",
               own["why"])
else:
    case.check("layers on (driver and torch)", 3, own["layers"])
    case.check("nothing to say", "", own["why"])
    case.check("CUPTI callbacks after detach", 0, own["callbacks_after_detach"])
case.check("libc10_cuda.so's GOT slot during attach", "libmemtrace-injected-test.so", own["slot_during"])
case.check("libc10_cuda.so's GOT slot after detach", "libc10.so", own["slot_after"])
case.check("the GOT slot holds its old value again", True, own["slot_restored"])
# 1 MiB before attach, 512 KiB and the 1 MiB free while attached, the 512 KiB free after: 4 reports, net 0 bytes.
case.check("reports that reached libc10.so's own hook", 4, own["libc10_reports"])
case.check("their net bytes", 0, own["libc10_net_bytes"])
case.check("live list without Python", 0, own["live_complete"])
case.check("why no live list", "no Python interpreter in this process: no PyTorch snapshot", own["live_why"])
case.check("no live entries", "", own["live"])
case.finish()
