"""The native frames kept per stack when the stack is deeper than that (tests/e2e/cuda_apis/deep_stack.cc: every
allocation 60 frames below main, on the runtime's, the linked driver's, the resolver's and PyTorch's hook
paths). With the tracer's default, 32 native frames; with MEMTRACE_MAX_FRAMES=10, 10. Fewer would mean the
tracer's own frames on some path outnumber the room stack_capture.cc unwinds for them (it fails with a room
of 4). It cannot see a room larger than needed, which costs time, not frames. Each such stack is marked cut
(Stack.native_frames_cut). With MEMTRACE_MAX_FRAMES=256 the whole stack fits (the 60 levels, main and libc's
start: more than 60 frames, their exact number is libc's) and none is marked.

Events with a stack: the ALLOCs (a FREE has none). The program makes 4 driver-level allocations of 1 MiB
(cudaMalloc, cuMemAlloc, and cuMemAlloc as cuGetProcAddress_v2 and cuGetProcAddress, each called by name,
hand it out), then one PyTorch block of 1024 bytes whose 2 MiB segment is a cudaMalloc inside the fake
allocator: 6 ALLOCs, each with a stack, and 5 FREEs (the allocator keeps its segment cached).
"""
import os

import e2e_lib

ALLOCS = ["CUDA_MALLOC", "CU_MEM_ALLOC", "CU_MEM_ALLOC", "CU_MEM_ALLOC", "CUDA_MALLOC", "TORCH_ALLOCATOR"]

case = e2e_lib.Case()
base_out_dir = case.args.out_dir
for max_frames, expected in ((None, 32), ("10", 10), ("256", None)):
    extra = {"MEMTRACE_MAX_FRAMES": max_frames} if max_frames else {}
    label = max_frames or "default"
    case.args.out_dir = os.path.join(base_out_dir, f"frames-{label}")  # one trace per directory
    os.makedirs(case.args.out_dir)
    _, trace = case.run_traced([case.program("deep_stack")], extra_env=extra)
    events = case.dump_events(trace, frames=True)
    allocs = [e for e in events if e["kind"] == "ALLOC"]
    case.check(f"max {label}: FREEs", 5, sum(e["kind"] == "FREE" for e in events))
    case.check(f"max {label}: ALLOC apis in order", ALLOCS, [e["api"] for e in allocs])
    for e in allocs:
        name = f"max {label}: {e['api']} at {e['address']:#x}"
        if expected is None:
            case.check(f"{name}: more than 60 native frames", True, e.get("native_frames", 0) > 60)
        else:
            case.check(f"{name}: native frames", expected, e.get("native_frames"))
        case.check(f"{name}: python frames", 0, e.get("python_frames"))
        case.check(f"{name}: native frames cut", expected is not None, e.get("native_frames_cut"))
        case.check(f"{name}: python frames cut", False, e.get("python_frames_cut"))
case.finish()
