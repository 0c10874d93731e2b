"""POOL_RESERVED samples of stream-ordered pools (MiB = 1048576), read back with dump_events.

The double's pool model (tests/fakecuda/driver_pools.h): an allocation grows the pool to its used bytes
rounded up to 2 MiB; a free keeps the memory; a synchronization shrinks each pool to max(used, release
threshold) rounded up to 2 MiB; cuMemPoolTrimTo(keep) to max(used, keep) rounded up. The tracer writes a
sample only when it differs from that pool's previous one (a pool's first sample always).

--mode shared / static: pool_samples.cc through the shared runtime (the runtime's API names the samples) or
the static one (only the driver calls it makes are seen: the driver's names). Device 0's current pool P0,
device 1's user pool U, device 0's graph pool G (address 0):
   step                                     used  reserved  sample
   cudaStreamSynchronize, no pool seen        -      -       none
   malloc a 3                               P0 3     4       P0 4      (alloc)
   malloc b 1                               P0 4     4       none
   malloc c 1                               P0 5     6       P0 6      (alloc)
   free a                                   P0 2     6       none (frees are not sampled)
   cudaStreamSynchronize (threshold 0)      P0 2     2       P0 2      (stream synchronize)
   cudaStreamSynchronize                    P0 2     2       none
   threshold 8; malloc d 7                  P0 9    10       P0 10     (alloc)
   free d; cudaEventSynchronize             P0 2   max(2,8)=8  P0 8    (event synchronize)
   cudaMemPoolTrimTo(P0, 3)                 P0 2   round(3)=4  P0 4    (trim)
   cudaMemPoolCreate U (device 1)           U 0      0       U 0       (create: first sample)
   mallocFromPool e 5                       U 5      6       U 6       (alloc from pool)
   free e; cudaStreamSynchronize            U 0      0       U 0;  P0 stays 4 (<= threshold 8)
   mallocFromPool f 1                       U 1      2       U 2       (alloc from pool)
   free f; cudaMemPoolDestroy U                      0       U 0       (destroy)
   graph pool 6 reserved, 2 used; trim      G 2      2       G 2       (graph mem trim)
   trim again                                                none
--mode driver: pool_samples_driver.cc, exported driver functions (and cuCtxSynchronize's CUDA 13 ABI as the
resolver hands it out):
   cuMemAllocAsync 3 -> P0 4; free; cuCtxSynchronize -> P0 0; cuMemAllocAsync_ptsz 1 -> P0 2; free;
   cuStreamSynchronize_ptsz -> P0 0; cuMemAllocAsync 2 -> P0 2; free; cuCtxSynchronize_v2 -> P0 0;
   cuMemPoolCreate U (device 1) -> U 0; cuMemAllocFromPoolAsync 3 -> U 4; free; cuMemPoolTrimTo(U, 1) ->
   round(1) = U 2; cuMemPoolDestroy -> U 0; cuMemAllocAsync 1 -> P0 2; free; cuEventSynchronize -> P0 0;
   device 1's graph pool 4 reserved, 2 used; cuDeviceGraphMemTrim(1) -> G1 2.
"""
import re
import sys

import e2e_lib
from e2e_lib import MIB


def add_arguments(parser):
    parser.add_argument("--mode", choices=("shared", "static", "driver"), required=True)


case = e2e_lib.Case(add_arguments)
mode = case.args.mode
program = {"shared": "pool_samples", "static": "pool_samples_static", "driver": "pool_samples_driver"}[mode]
stdout, trace = case.run_traced([case.program(program)])
pools = re.search(r"pool0 (0x[0-9a-f]+) user (0x[0-9a-f]+)", stdout)
if not pools:
    sys.exit("FAIL: the program did not print its pools")
P0, U = int(pools.group(1), 16), int(pools.group(2), 16)
G = 0

events = case.dump_events(trace)

runtime = mode == "shared"
ALLOC_ASYNC = "CUDA_MALLOC_ASYNC" if runtime else "CU_MEM_ALLOC_ASYNC"
ALLOC_POOL = "CUDA_MALLOC_FROM_POOL_ASYNC" if runtime else "CU_MEM_ALLOC_FROM_POOL_ASYNC"
STREAM_SYNC = "CUDA_STREAM_SYNCHRONIZE" if runtime else "CU_STREAM_SYNCHRONIZE"
EVENT_SYNC = "CUDA_EVENT_SYNCHRONIZE" if runtime else "CU_EVENT_SYNCHRONIZE"
TRIM = "CUDA_MEM_POOL_TRIM_TO" if runtime else "CU_MEM_POOL_TRIM_TO"
CREATE = "CUDA_MEM_POOL_CREATE" if runtime else "CU_MEM_POOL_CREATE"
DESTROY = "CUDA_MEM_POOL_DESTROY" if runtime else "CU_MEM_POOL_DESTROY"
GRAPH_TRIM = "CUDA_DEVICE_GRAPH_MEM_TRIM" if runtime else "CU_DEVICE_GRAPH_MEM_TRIM"

# (kind, api, device, pool, size) in trace order; ALLOC/FREE rows show where each sample falls.
if mode in ("shared", "static"):
    expected = [
        ("ALLOC", ALLOC_ASYNC, 0, None, 3 * MIB), ("POOL_RESERVED", ALLOC_ASYNC, 0, P0, 4 * MIB),
        ("ALLOC", ALLOC_ASYNC, 0, None, 1 * MIB),
        ("ALLOC", ALLOC_ASYNC, 0, None, 1 * MIB), ("POOL_RESERVED", ALLOC_ASYNC, 0, P0, 6 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", STREAM_SYNC, 0, P0, 2 * MIB),
        ("ALLOC", ALLOC_ASYNC, 0, None, 7 * MIB), ("POOL_RESERVED", ALLOC_ASYNC, 0, P0, 10 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", EVENT_SYNC, 0, P0, 8 * MIB),
        ("POOL_RESERVED", TRIM, 0, P0, 4 * MIB),
        ("POOL_RESERVED", CREATE, 1, U, 0),
        ("ALLOC", ALLOC_POOL, 1, None, 5 * MIB), ("POOL_RESERVED", ALLOC_POOL, 1, U, 6 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", STREAM_SYNC, 1, U, 0),
        ("ALLOC", ALLOC_POOL, 1, None, 1 * MIB), ("POOL_RESERVED", ALLOC_POOL, 1, U, 2 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", DESTROY, 1, U, 0),
        ("POOL_RESERVED", GRAPH_TRIM, 0, G, 2 * MIB),
        ("FREE", None, None, None, None),
        ("FREE", None, None, None, None),
    ]
else:
    expected = [
        ("ALLOC", "CU_MEM_ALLOC_ASYNC", 0, None, 3 * MIB), ("POOL_RESERVED", "CU_MEM_ALLOC_ASYNC", 0, P0, 4 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", "CU_CTX_SYNCHRONIZE", 0, P0, 0),
        ("ALLOC", "CU_MEM_ALLOC_ASYNC", 0, None, 1 * MIB), ("POOL_RESERVED", "CU_MEM_ALLOC_ASYNC", 0, P0, 2 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", "CU_STREAM_SYNCHRONIZE", 0, P0, 0),
        ("ALLOC", "CU_MEM_ALLOC_ASYNC", 0, None, 2 * MIB), ("POOL_RESERVED", "CU_MEM_ALLOC_ASYNC", 0, P0, 2 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", "CU_CTX_SYNCHRONIZE", 0, P0, 0),
        ("POOL_RESERVED", "CU_MEM_POOL_CREATE", 1, U, 0),
        ("ALLOC", "CU_MEM_ALLOC_FROM_POOL_ASYNC", 1, None, 3 * MIB),
        ("POOL_RESERVED", "CU_MEM_ALLOC_FROM_POOL_ASYNC", 1, U, 4 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", "CU_MEM_POOL_TRIM_TO", 1, U, 2 * MIB),
        ("POOL_RESERVED", "CU_MEM_POOL_DESTROY", 1, U, 0),
        ("ALLOC", "CU_MEM_ALLOC_ASYNC", 0, None, 1 * MIB), ("POOL_RESERVED", "CU_MEM_ALLOC_ASYNC", 0, P0, 2 * MIB),
        ("FREE", None, None, None, None),
        ("POOL_RESERVED", "CU_EVENT_SYNCHRONIZE", 0, P0, 0),
        ("POOL_RESERVED", "CU_DEVICE_GRAPH_MEM_TRIM", 1, G, 2 * MIB),
    ]

# Only the fields a row names are compared (None: any value).
measured = []
for e in events:
    row = (e["kind"], e["api"], e["device"], e["address"] if e["kind"] == "POOL_RESERVED" else None, e["size"])
    measured.append(row)
mask = [tuple(None if want is None else got for want, got in zip(exp, row)) for exp, row in zip(expected, measured)]
case.check("event count", len(expected), len(measured))
for i, (exp, got) in enumerate(zip(expected, mask)):
    case.check(f"event {i}", exp, got)
case.check("samples carry no stack", [False] * sum(1 for e in events if e["kind"] == "POOL_RESERVED"),
           [e["has_stack"] for e in events if e["kind"] == "POOL_RESERVED"])
case.finish()
