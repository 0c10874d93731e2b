"""Compares memtrace's iterations, growth per iteration, peak breakdown and backward attribution for one of
tests/gpu/iteration_jobs.py's jobs with the job's own figures; used by scripts/gpu-check's `iterations` group.

    iteration_checks.py JOB NAME --truth T.json --summary S.json --leaks L.json --peak P.json --dump D.jsonl

T.json is the job's side file; S, L, P are `memtrace summary|leaks|peak --json`; D is `memtrace dump TRACE --frames`.
Prints one `check ...: ok|FAIL` line per check (as tests/gpu/checks.py); exit 1 when any failed, 2 when an input
cannot be read.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checker, load_json  # noqa: E402

TRAIN_JOBS = ("train", "train_prewarmed", "nvtx")
KEPT_GRAPH_JOBS = ("eval_graph", "hf_eval")


def read_dump(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print(f"iteration_checks.py: {path}: cannot read memtrace dump output: {e}", file=sys.stderr)
        sys.exit(2)


def check_iterations(c, truth, iterations):
    expected_source = "nvtx" if truth["job"] == "nvtx" else "python_loop"
    c.check("iterations found from", expected_source, iterations.get("source"))
    c.check("iteration count", truth["iterations"], iterations.get("count"))
    if expected_source == "python_loop":
        loop = iterations.get("loop") or {}
        c.check("loop file", truth["loop_file"], loop.get("file"))
        c.check("loop function", truth["loop_function"], loop.get("function"))
        c.check("loop body's first allocating line", truth["body_line"], loop.get("line"))
    else:
        c.check("iteration range name", "step", iterations.get("range_name"))
    at_end = [i.get("allocated_at_end_bytes") for i in iterations.get("iterations", [])]
    want = truth["allocated_after_iteration_bytes"]
    # The last iteration's end is where the loop's events stop; the job samples after it: all but the last agree.
    c.check("allocated at the end of iterations 1..n-1 (torch.cuda.memory_allocated)", want[:-1], at_end[:-1])
    c.check("growth per iteration bytes", truth["growth_per_iteration_bytes"],
            iterations.get("growth_per_iteration_bytes"))


def check_traps(c, truth, iterations):
    kinds = [t.get("kind") for t in iterations.get("traps", [])]
    if truth["job"] in KEPT_GRAPH_JOBS:
        c.check("trap named: graph kept across iterations", True, "kept_graph" in kinds)
        line = next((g for g in iterations.get("growth_by_user_line", []) if g.get("line") == truth["leak_line"]), None)
        c.check(f"growth grouped under the user's line {truth['leak_line']}", True, line is not None)
    else:
        c.check("no kept-graph trap", False, "kept_graph" in kinds)
    if truth["job"] in TRAIN_JOBS:  # `kept.append(out.detach())`: one tensor per iteration, not a graph
        c.check("trap named: a tensor kept per iteration", True, "kept_tensor" in kinds)


def python_frames_of(dump):
    frames = {r["id"]: r for r in dump if r.get("record") == "python_frame"}
    stacks = {r["id"]: r for r in dump if r.get("record") == "stack"}
    return frames, stacks


def check_backward_attribution(c, truth, dump):
    """Every allocation of a weight's gradient (WIDTH x WIDTH fp32, made by the autograd thread during
    loss.backward()) has a stack borrowed from the thread in backward, showing the script's loss.backward() line."""
    frames, stacks = python_frames_of(dump)
    python_bit = 1 << 63
    main_tid = next((r["tid"] for r in dump if r.get("record") == "event" and r.get("python_frames", 0) > 0), None)
    grad_bytes = 1024 * 1024 * 4
    grads = [r for r in dump if r.get("record") == "event" and r.get("kind") == "ALLOC"
             and r.get("layer") == "LAYER_BLOCK" and r.get("size") == grad_bytes and r.get("tid") != main_tid]
    attributed = 0
    for event in grads:
        stack = stacks.get(event.get("stack_id"), {})
        lines = [(os.path.basename(frames[f & ~python_bit]["file"]), frames[f & ~python_bit]["line"])
                 for f in stack.get("frames", []) if f & python_bit and (f & ~python_bit) in frames]
        if stack.get("python_frames_from_backward") and ("iteration_jobs.py", truth["backward_line"]) in lines:
            attributed += 1
    c.check("gradient allocations on the autograd thread", f"> 0", len(grads), len(grads) > 0)
    c.check(f"of them, with the Python stack of loss.backward() (iteration_jobs.py:{truth['backward_line']})",
            len(grads), attributed)


def all_frame_lists(value):
    """Every `frames` list anywhere in a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "frames" and isinstance(item, list):
                yield item
            else:
                yield from all_frame_lists(item)
    elif isinstance(value, list):
        for item in value:
            yield from all_frame_lists(item)


def check_backward_node(c, truth, peak):
    """A gradient live at the peak shows its autograd node and the loss.backward() line together."""
    found = None
    for frames in all_frame_lists(peak):
        functions = [str(f.get("function", "")) for f in frames]
        node = next((f for f in functions if "Backward0::apply" in f or "AccumulateGrad::apply" in f), None)
        line = any(os.path.basename(str(f.get("file", ""))) == "iteration_jobs.py"
                   and f.get("line") == truth["backward_line"] for f in frames)
        if node and line:
            found = node
            break
    c.check("a site at the peak with an autograd node and the loss.backward() line", True, found is not None)


def check_breakdown(c, truth, peak):
    """The rows of `memtrace peak --json` at device 0's peak allocated against the job's own tensor sizes."""
    entry = next((p for p in peak.get("peaks", []) if p.get("device") == 0), {})
    rows = (entry.get("breakdown") or {}).get("rows", {})
    c.check("breakdown phases found from", "nvtx" if truth["job"] == "nvtx" else "python_loop",
            (entry.get("breakdown") or {}).get("phases_source"))
    for key, row in (("parameter_bytes", "parameters"), ("gradient_bytes", "gradients"),
                     ("optimizer_state_bytes", "optimizer_state")):
        if key in truth:
            c.check(f"{row} at the peak bytes", truth[key], (rows.get(row) or {}).get("bytes"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job")
    parser.add_argument("name")
    for option in ("--truth", "--summary", "--leaks", "--peak", "--dump"):
        parser.add_argument(option, required=True)
    args = parser.parse_args()
    c = Checker(args.name)
    truth = load_json(args.truth, "iteration_jobs.py's side file")
    summary = load_json(args.summary, "memtrace summary --json output")
    peak = load_json(args.peak, "memtrace peak --json output")
    iterations = summary.get("iterations") or {}
    check_iterations(c, truth, iterations)
    check_traps(c, truth, iterations)
    if truth["job"] in TRAIN_JOBS:
        check_breakdown(c, truth, peak)
        check_backward_attribution(c, truth, read_dump(args.dump))
        check_backward_node(c, truth, peak)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
