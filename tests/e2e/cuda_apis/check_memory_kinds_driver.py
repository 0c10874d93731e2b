"""memory_kinds_driver.cc through the driver API (linked with -lcuda): every event in order.

Sizes (MiB = 1048576, KiB = 1024). Arrays: their elements' bytes, except the deferred-mapping one, which the
driver sizes (the test double's rule: the elements' bytes rounded up to 64 KiB = 65536).
  pinned 1 MiB, host_alloc 2 MiB, registered 64 KiB = 65536
  array_2d: float 1000 (height 0: absent) = 4000
  array_3d: 64 x 64 x 64 x 2 channels x 2 bytes = 1048576
  mipmapped: 128 x 128 x 4 channels x 1 byte = 65536, + 64 x 64 x 4 = 16384: 81920
  deferred: float 100 x 100 = 40000 -> the driver's 65536
  cuMemCreate on a host NUMA node 2 MiB: host memory, the current device (0); on device 1 4 MiB
  IPC import 1 MiB on device 0; external memory buffer 3 MiB; shareable-handle import: size unknown (0)
  captured 1 MiB (capture 1, stream 0x6100), per_thread 256 KiB = 262144 (capture 2, the per-thread
  stream); graph memory node 2 MiB on device 0; in_primary 5 MiB (device 0's primary context, reset);
  in_own 3 MiB in a context of device 0 made with cuCtxCreate (destroyed). cuDevicePrimaryCtxRelease records
  nothing.
Contexts: every allocation the driver frees with a context names the one current when it was made: pinned,
host_alloc, the four arrays and in_primary device 0's primary context (primary0, retained by the program),
in_own its own context. VMM handles, registered host memory, imports, pool blocks and graph nodes name none
(0). cuCtxDestroy names the context destroyed (own); the reset names primary0, which the tracer learnt from
the program's cuDevicePrimaryCtxRetain.
"""
import e2e_lib
from memory_kinds_lib import KIB, MIB, alloc, compare, event, events, free, values

case = e2e_lib.Case()
stdout, trace = case.run_traced([case.program("memory_kinds_driver")])
v = values(stdout)
stream = 0x6100
primary0, own = v["primary0"], v["own"]
case.check("the two contexts are distinct handles", True, primary0 != 0 and own != 0 and primary0 != own)
expected = [
    alloc("CU_MEM_ALLOC_HOST", memory="MEMORY_HOST_PINNED", device=0, address=v["pinned"], size=1 * MIB,
          context=primary0),
    alloc("CU_MEM_HOST_ALLOC", memory="MEMORY_HOST_PINNED", device=0, address=v["host_alloc"], size=2 * MIB,
          context=primary0),
    alloc("CU_MEM_HOST_REGISTER", memory="MEMORY_HOST_REGISTERED", device=0, address=v["registered"],
          size=64 * KIB),
    alloc("CU_ARRAY_CREATE", memory="MEMORY_ARRAY", device=0, address=v["array_2d"], size=4000, context=primary0),
    alloc("CU_ARRAY_3D_CREATE", memory="MEMORY_ARRAY", device=0, address=v["array_3d"], size=1048576,
          context=primary0),
    alloc("CU_MIPMAPPED_ARRAY_CREATE", memory="MEMORY_ARRAY", device=0, address=v["mipmapped"], size=81920,
          context=primary0),
    alloc("CU_ARRAY_3D_CREATE", memory="MEMORY_ARRAY", device=0, address=v["deferred"], size=65536, context=primary0),
    alloc("CU_MEM_CREATE", memory="MEMORY_HOST_PINNED", device=0, address=v["host_handle"], size=2 * MIB),
    alloc("CU_MEM_CREATE", device=1, address=v["device_handle"], size=4 * MIB),
    alloc("CU_IPC_OPEN_MEM_HANDLE", memory="MEMORY_IMPORTED", device=0, address=v["ipc"], size=1 * MIB),
    alloc("CU_EXTERNAL_MEMORY_GET_MAPPED_BUFFER", memory="MEMORY_IMPORTED", device=0, address=v["mapped_buffer"],
          size=3 * MIB),
    alloc("CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE", memory="MEMORY_IMPORTED", device=0, address=v["shared_handle"]),
    alloc("CU_MEM_ALLOC_ASYNC", layer="LAYER_BLOCK", device=0, stream=stream, address=v["captured"], size=1 * MIB,
          capture_id=1),
    free("CU_MEM_FREE_ASYNC", layer="LAYER_BLOCK", stream=stream, address=v["captured"], capture_id=1),
    event("GRAPH_CAPTURED", "CU_STREAM_END_CAPTURE", stream=stream, graph=v["captured_graph"], capture_id=1),
    event("GRAPH_INSTANTIATE", "CU_GRAPH_INSTANTIATE", address=v["captured_exec"], graph=v["captured_graph"]),
    event("GRAPH_LAUNCH", "CU_GRAPH_LAUNCH", address=v["captured_exec"], stream=stream),
    alloc("CU_MEM_ALLOC_ASYNC", layer="LAYER_BLOCK", device=0, address=v["per_thread"], size=256 * KIB,
          capture_id=2),
    event("GRAPH_CAPTURED", "CU_STREAM_END_CAPTURE", graph=v["per_thread_graph"], capture_id=2),
    alloc("CU_GRAPH_ADD_MEM_ALLOC_NODE", layer="LAYER_BLOCK", device=0, address=v["node_memory"], size=2 * MIB,
          graph=v["built"]),
    free("CU_GRAPH_ADD_MEM_FREE_NODE", layer="LAYER_BLOCK", address=v["node_memory"], graph=v["built"]),
    event("GRAPH_INSTANTIATE", "CU_GRAPH_INSTANTIATE", address=v["built_exec"], graph=v["built"]),
    event("GRAPH_LAUNCH", "CU_GRAPH_LAUNCH", address=v["built_exec"]),
    free("CU_MEM_FREE_HOST", address=v["pinned"]),
    free("CU_MEM_FREE_HOST", address=v["host_alloc"]),
    free("CU_MEM_HOST_UNREGISTER", address=v["registered"]),
    free("CU_ARRAY_DESTROY", address=v["array_2d"]),
    free("CU_ARRAY_DESTROY", address=v["array_3d"]),
    free("CU_MIPMAPPED_ARRAY_DESTROY", address=v["mipmapped"]),
    free("CU_ARRAY_DESTROY", address=v["deferred"]),
    free("CU_MEM_RELEASE", address=v["host_handle"]),
    free("CU_MEM_RELEASE", address=v["device_handle"]),
    free("CU_IPC_CLOSE_MEM_HANDLE", address=v["ipc"]),
    free("CU_MEM_FREE", address=v["mapped_buffer"]),
    free("CU_MEM_RELEASE", address=v["shared_handle"]),
    alloc("CU_MEM_ALLOC", device=0, address=v["in_primary"], size=5 * MIB, context=primary0),
    alloc("CU_MEM_ALLOC", device=0, address=v["in_own"], size=3 * MIB, context=own),
    event("CONTEXT_DESTROY", "CU_CTX_DESTROY", device=0, address=own),
    event("CONTEXT_DESTROY", "CU_DEVICE_PRIMARY_CTX_RESET", device=0, address=primary0),
]
compare(case, expected, events(case, trace))
case.finish()
