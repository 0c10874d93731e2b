"""memory_kinds.cc through the shared runtime (runtime hooks) or the static one (the driver calls it makes):
every event in order, with its category, layer, device, size and graph links.

Sizes (MiB = 1048576, KiB = 1024). Arrays made without deferred mapping, which the driver will not size:
their elements' bytes.
  pinned 1 MiB, host_alloc 2 MiB, registered 64 KiB = 65536
  array_2d: float4 100 x 10 = 1000 elements x 16 bytes = 16000
  array_3d: uchar 300 x 200 x 5 = 300000
  mipmapped: float 256 x 256, 3 levels: 256 x 256 x 4 = 262144, + 128 x 128 x 4 = 65536, + 64 x 64 x 4 = 16384:
             344064
  cudaMalloc3D 1000 x 20 x 3: pitch 1024 (rows padded to 512 bytes) x 60 rows = 61440
  managed 3 MiB; IPC import: the handle says 4 MiB on device 1
  before_capture 1 MiB (not captured), captured 512 KiB = 524288 (capture 1), per_thread 256 KiB = 262144
  (capture 2, the per-thread stream), legacy 128 KiB = 131072 (stream 0 is not the per-thread stream: not
  captured); graph memory node 8 MiB on device 1; left_to_reset 5 MiB, freed by the device reset.
Capture ids: the double numbers captures from 1 in the order they begin.
Contexts: every allocation the driver frees with a context (pinned, host_alloc, the three arrays, pitched,
managed, left_to_reset) names the current one, device 0's primary context (primary0: the runtime retained it
at cudaSetDevice); registered host memory, the import, pool blocks and graph nodes name none (0). The reset
names primary0 as the context it destroys.
"""
import e2e_lib
from memory_kinds_lib import KIB, MIB, alloc, compare, event, events, free, values


def add_arguments(parser):
    parser.add_argument("--runtime", choices=("shared", "static"), required=True)


case = e2e_lib.Case(add_arguments)
shared = case.args.runtime == "shared"
stdout, trace = case.run_traced([case.program("memory_kinds_" + case.args.runtime)])
v = values(stdout)
stream = 0x5100
primary0 = v["primary0"]
case.check("device 0's primary context is a handle (not 0, which names no context)", True, primary0 != 0)


def api(runtime_name, driver_name):
    """The runtime hook records the runtime call; with the static runtime only the driver call is seen."""
    return runtime_name if shared else driver_name


expected = [
    alloc(api("CUDA_MALLOC_HOST", "CU_MEM_ALLOC_HOST"), memory="MEMORY_HOST_PINNED", device=0,
          address=v["pinned"], size=1 * MIB, context=primary0),
    alloc(api("CUDA_HOST_ALLOC", "CU_MEM_HOST_ALLOC"), memory="MEMORY_HOST_PINNED", device=0,
          address=v["host_alloc"], size=2 * MIB, context=primary0),
    alloc(api("CUDA_HOST_REGISTER", "CU_MEM_HOST_REGISTER"), memory="MEMORY_HOST_REGISTERED", device=0,
          address=v["registered"], size=64 * KIB),
    alloc(api("CUDA_MALLOC_ARRAY", "CU_ARRAY_CREATE"), memory="MEMORY_ARRAY", device=0, address=v["array_2d"],
          size=16000, context=primary0),
    alloc(api("CUDA_MALLOC_3D_ARRAY", "CU_ARRAY_3D_CREATE"), memory="MEMORY_ARRAY", device=0,
          address=v["array_3d"], size=300000, context=primary0),
    alloc(api("CUDA_MALLOC_MIPMAPPED_ARRAY", "CU_MIPMAPPED_ARRAY_CREATE"), memory="MEMORY_ARRAY", device=0,
          address=v["mipmapped"], size=344064, context=primary0),
    alloc(api("CUDA_MALLOC_3D", "CU_MEM_ALLOC_PITCH"), device=0, address=v["pitched"], size=61440, context=primary0),
    alloc(api("CUDA_MALLOC_MANAGED", "CU_MEM_ALLOC_MANAGED"), memory="MEMORY_MANAGED", device=0,
          address=v["managed"], size=3 * MIB, context=primary0),
    alloc(api("CUDA_IPC_OPEN_MEM_HANDLE", "CU_IPC_OPEN_MEM_HANDLE"), memory="MEMORY_IMPORTED", device=1,
          address=v["imported"], size=4 * MIB),
    alloc(api("CUDA_MALLOC_ASYNC", "CU_MEM_ALLOC_ASYNC"), layer="LAYER_BLOCK", device=0, stream=stream,
          address=v["before_capture"], size=1 * MIB),
    alloc(api("CUDA_MALLOC_ASYNC", "CU_MEM_ALLOC_ASYNC"), layer="LAYER_BLOCK", device=0, stream=stream,
          address=v["captured"], size=512 * KIB, capture_id=1),
    free(api("CUDA_FREE_ASYNC", "CU_MEM_FREE_ASYNC"), layer="LAYER_BLOCK", stream=stream,
         address=v["before_capture"], capture_id=1),
    free(api("CUDA_FREE_ASYNC", "CU_MEM_FREE_ASYNC"), layer="LAYER_BLOCK", stream=stream, address=v["captured"],
         capture_id=1),
    event("GRAPH_CAPTURED", api("CUDA_STREAM_END_CAPTURE", "CU_STREAM_END_CAPTURE"), stream=stream,
          graph=v["captured_graph"], capture_id=1),
    event("GRAPH_INSTANTIATE", api("CUDA_GRAPH_INSTANTIATE", "CU_GRAPH_INSTANTIATE"), address=v["captured_exec"],
          graph=v["captured_graph"]),
    event("GRAPH_LAUNCH", api("CUDA_GRAPH_LAUNCH", "CU_GRAPH_LAUNCH"), address=v["captured_exec"], stream=stream),
    alloc(api("CUDA_MALLOC_ASYNC", "CU_MEM_ALLOC_ASYNC"), layer="LAYER_BLOCK", device=0, address=v["per_thread"],
          size=256 * KIB, capture_id=2),
    alloc(api("CUDA_MALLOC_ASYNC", "CU_MEM_ALLOC_ASYNC"), layer="LAYER_BLOCK", device=0, address=v["legacy"],
          size=128 * KIB),
    event("GRAPH_CAPTURED", api("CUDA_STREAM_END_CAPTURE", "CU_STREAM_END_CAPTURE"),
          graph=v["per_thread_graph"], capture_id=2),
    free(api("CUDA_FREE_ASYNC", "CU_MEM_FREE_ASYNC"), layer="LAYER_BLOCK", address=v["legacy"]),
    alloc(api("CUDA_GRAPH_ADD_MEM_ALLOC_NODE", "CU_GRAPH_ADD_MEM_ALLOC_NODE"), layer="LAYER_BLOCK", device=1,
          address=v["node_memory"], size=8 * MIB, graph=v["built"]),
    free(api("CUDA_GRAPH_ADD_MEM_FREE_NODE", "CU_GRAPH_ADD_MEM_FREE_NODE"), layer="LAYER_BLOCK",
         address=v["node_memory"], graph=v["built"]),
    event("GRAPH_INSTANTIATE", api("CUDA_GRAPH_INSTANTIATE", "CU_GRAPH_INSTANTIATE"), address=v["built_exec"],
          graph=v["built"]),
    event("GRAPH_LAUNCH", api("CUDA_GRAPH_LAUNCH", "CU_GRAPH_LAUNCH"), address=v["built_exec"], stream=stream),
    free(api("CUDA_FREE_HOST", "CU_MEM_FREE_HOST"), address=v["pinned"]),
    free(api("CUDA_FREE_HOST", "CU_MEM_FREE_HOST"), address=v["host_alloc"]),
    free(api("CUDA_HOST_UNREGISTER", "CU_MEM_HOST_UNREGISTER"), address=v["registered"]),
    free(api("CUDA_FREE_ARRAY", "CU_ARRAY_DESTROY"), address=v["array_2d"]),
    free(api("CUDA_FREE_ARRAY", "CU_ARRAY_DESTROY"), address=v["array_3d"]),
    free(api("CUDA_FREE_MIPMAPPED_ARRAY", "CU_MIPMAPPED_ARRAY_DESTROY"), address=v["mipmapped"]),
    free(api("CUDA_FREE", "CU_MEM_FREE"), address=v["pitched"]),
    free(api("CUDA_FREE", "CU_MEM_FREE"), address=v["managed"]),
    free(api("CUDA_IPC_CLOSE_MEM_HANDLE", "CU_IPC_CLOSE_MEM_HANDLE"), address=v["imported"]),
    alloc(api("CUDA_MALLOC", "CU_MEM_ALLOC"), device=0, address=v["left_to_reset"], size=5 * MIB, context=primary0),
    event("CONTEXT_DESTROY", api("CUDA_DEVICE_RESET", "CU_DEVICE_PRIMARY_CTX_RESET"), device=0,
          address=primary0),
]
compare(case, expected, events(case, trace))
case.finish()
