"""The native frames kept on a thread that runs Python and on one that does not (tests/e2e/python/deep_python_stack.py
and deep_alloc.cc: a cudaMalloc 40 native frames below a ctypes call 4 Python frames deep, then one 40 frames
deep on a thread without Python). Both stacks are deeper than any depth asked for below, so each keeps exactly
the frames allowed: by default 16 native frames where the thread has Python frames (then its 4 Python frames,
appended outermost: the unwind stops before the interpreter's loop) and 32 where it has none;
MEMTRACE_MAX_FRAMES=10 sets both to 10; MEMTRACE_MAX_FRAMES_PYTHON=24 sets the Python thread's alone, as does
libmemtrace-bench-toggle.so's run-time switch (memtrace_bench_set_max_frames_python). The edges:
MEMTRACE_PYTHON_FRAMES=0 (no thread has Python frames, so both keep 32), MEMTRACE_MAX_FRAMES=0 (Python frames
alone, and no stack at all on the plain thread), MEMTRACE_MAX_FRAMES_PYTHON=0 (the Python thread's Python frames
alone). Every stack that keeps native frames here is cut short and marked so (Stack.native_frames_cut); one
with none is not (nothing was unwound); none has more Python frames than the 128 kept. With
MEMTRACE_MAX_FRAMES=256 both stacks fit whole and neither is marked.

Then the Python frames kept (tests/e2e/python/deep_python_recursion.py): an allocation under 128 Python frames keeps
them all, unmarked; under 129, the innermost 128, marked Stack.python_frames_cut.

Events: cudaMalloc and cudaFree on each thread, 2 ALLOCs (each with a stack) and 2 FREEs.
"""
import os

import e2e_lib

case = e2e_lib.Case(lambda parser: parser.add_argument("--toggle-library", required=True))
script = case.source("deep_python_stack.py")
library = os.path.join(case.args.program_dir, "libe2e_deep_alloc.so")
base_out_dir = case.args.out_dir
# (name, environment, arguments after the library, the Python thread's native and Python frames, the plain
# thread's native frames); None: the ALLOC has no stack at all.
toggle = {"LD_PRELOAD": case.args.toggle_library}
for name, env, args, python_thread, python_frames, plain_thread in (
        ("default", {}, [], 16, 4, 32),
        ("max-10", {"MEMTRACE_MAX_FRAMES": "10"}, [], 10, 4, 10),
        ("python-24", {"MEMTRACE_MAX_FRAMES_PYTHON": "24"}, [], 24, 4, 32),
        # A bad value is refused (one line on stderr) and counts as unset: the defaults.
        ("max-bad", {"MEMTRACE_MAX_FRAMES": "16x"}, [], 16, 4, 32),
        # Python frames off: no thread has any, so every thread keeps MEMTRACE_MAX_FRAMES.
        ("python-off", {"MEMTRACE_PYTHON_FRAMES": "0"}, [], 32, 0, 32),
        # No native frames anywhere: the Python thread keeps its Python frames alone, the plain thread nothing.
        ("max-0", {"MEMTRACE_MAX_FRAMES": "0"}, [], 0, 4, None),
        # No native frames on the Python thread only.
        ("python-0", {"MEMTRACE_MAX_FRAMES_PYTHON": "0"}, [], 0, 4, 32),
        # The measurement build's run-time switch (preload/measure/bench_toggle.h): 24 frames asked for under Python.
        ("toggle-24", toggle, ["24"], 24, 4, 32),
        # ...and a negative depth: back to the configured one.
        ("toggle-back", dict(toggle, MEMTRACE_MAX_FRAMES_PYTHON="20"), ["-1"], 20, 4, 32)):
    case.args.out_dir = os.path.join(base_out_dir, name)  # one trace per directory
    os.makedirs(case.args.out_dir)
    _, trace = case.run_traced([case.args.python, script, library] + args, extra_env=env)
    events = case.dump_events(trace, frames=True)
    allocs = [e for e in events if e["kind"] == "ALLOC"]
    case.check(f"{name}: ALLOC apis", ["CUDA_MALLOC", "CUDA_MALLOC"], [e["api"] for e in allocs])
    case.check(f"{name}: FREEs", 2, sum(e["kind"] == "FREE" for e in events))
    if len(allocs) != 2:
        continue
    here, on_thread = allocs
    case.check(f"{name}: the two ALLOCs on different threads", True, here["tid"] != on_thread["tid"])
    case.check(f"{name}: Python thread's native frames", python_thread, here.get("native_frames"))
    case.check(f"{name}: Python thread's python frames", python_frames, here.get("python_frames"))
    case.check(f"{name}: plain thread's native frames", plain_thread, on_thread.get("native_frames"))
    case.check(f"{name}: plain thread's python frames", None if plain_thread is None else 0,
               on_thread.get("python_frames"))
    case.check(f"{name}: Python thread's native frames cut", python_thread > 0, here.get("native_frames_cut"))
    case.check(f"{name}: Python thread's python frames cut", False, here.get("python_frames_cut"))
    case.check(f"{name}: plain thread's native frames cut", None if plain_thread is None else True,
               on_thread.get("native_frames_cut"))
    # The trace says how deep the tracer went, as configured (TraceStart.max_native_frames / _python): the
    # measurement build's run-time switch is not a setting, so the toggle cases show the configured depths.
    configured = {"default": (32, 16), "max-10": (10, 10), "python-24": (32, 24), "max-bad": (32, 16),
                  "python-off": (32, 16), "max-0": (0, 0), "python-0": (32, 0), "toggle-24": (32, 16),
                  "toggle-back": (32, 20)}[name]
    overview = case.analyze("summary", trace)["trace"]
    case.check(f"{name}: trace.max_native_frames, _python", configured,
               (overview.get("max_native_frames"), overview.get("max_native_frames_python")))


def traced_allocs(name, argv, env):
    case.args.out_dir = os.path.join(base_out_dir, name)
    os.makedirs(case.args.out_dir)
    _, trace = case.run_traced(argv, extra_env=env)
    allocs = [e for e in case.dump_events(trace, frames=True) if e["kind"] == "ALLOC"]
    case.check(f"{name}: ALLOC apis", ["CUDA_MALLOC", "CUDA_MALLOC"], [e["api"] for e in allocs])
    return allocs if len(allocs) == 2 else []


# Room for the whole stack on both threads: 40 levels, ctypes and the interpreter (or the thread's start) fit
# in 256 native frames, so no unwind stops at its limit.
for e, thread in zip(traced_allocs("max-256", [case.args.python, script, library], {"MEMTRACE_MAX_FRAMES": "256"}),
                     ("Python thread", "plain thread")):
    case.check(f"max-256: {thread}'s native frames past the 40 levels", True, e.get("native_frames", 0) > 40)
    case.check(f"max-256: {thread}'s native frames cut", False, e.get("native_frames_cut"))
    case.check(f"max-256: {thread}'s python frames cut", False, e.get("python_frames_cut"))

recursion = case.source("deep_python_recursion.py")
for e, (python_frames, cut) in zip(traced_allocs("recursion", [case.args.python, recursion, library], {}),
                                   ((128, False), (128, True))):
    name = f"recursion: {python_frames}{'+' if cut else ''} Python frames"
    case.check(f"{name}: python frames kept", python_frames, e.get("python_frames"))
    case.check(f"{name}: python frames cut", cut, e.get("python_frames_cut"))
case.finish()
