"""Checks `memtrace export --format memory-viz` on a training run PyTorch recorded too (tests/gpu/memory_viz_job.py);
used by scripts/gpu-check's `exports` group.

    memory_viz_checks.py NAME --trace T.mtrace --memtrace BIN --torch-snapshot S.pickle --work DIR

1. exports T as a pickle and as JSON (DIR/NAME.memory_viz.pickle, .json): both written, the same snapshot, and
   consistent the way the memory_viz page replays it (tests/analyzer/memory_viz_check.py);
2. runs `python -m torch.cuda._memory_viz stats|trace_plot|segment_plot` on memtrace's pickle: each exits 0 and
   writes its output;
3. compares memtrace's PyTorch block events with PyTorch's own snapshot one for one, on the job's device:
   - the entries compared are `alloc` and `free_completed`, PyTorch's allocator events only (memtrace's segment
     entries and everything outside PyTorch's allocator have no counterpart in PyTorch's snapshot);
   - memtrace records a free where PyTorch's allocator reports it to the profiler (c10::reportMemoryUsageToProfiler
     at the end of free()), which comes after PyTorch's free_requested and free_completed entries of that block
     when no other stream holds it up (record_stream, which this job never calls): the order of memtrace's frees is
     then that of PyTorch's free_completed entries;
   - count, order, action and address must be equal; the size cannot be: PyTorch's entries carry the size the
     program asked for (TraceEntry's orig_size / block->requested_size), memtrace the block's size (what the
     allocator reports to the profiler: block->size). The block is the request rounded up to 512 bytes, exactly for
     a request of at most 1 MiB (small pool: a remainder is always split off), and up to 1 MiB more for a larger one
     (large pool: a remainder of at most kSmallSize = 1 MiB stays in the block), so that is what is checked;
   - exactly: the blocks live at the end (PyTorch's `segments` give their block sizes too) and PyTorch's segments
     (address and size), each among memtrace's.
Prints one `check ...: ok|FAIL` line per check (as tests/gpu/checks.py); exit 1 when any failed, 2 when an input
cannot be read.
"""
import argparse
import json
import os
import pickle
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONSISTENCY = os.path.join(ROOT, "tests", "analyzer", "memory_viz_check.py")
SMALL_REQUEST = 1 << 20  # kSmallSize: requests up to this size come from the small pool
ROUND = 512              # kMinBlockSize: every block is a multiple of it


def load_pickle(path, what):
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError) as e:
        print(f"memory_viz_checks.py: {path}: cannot read {what}: {e}", file=sys.stderr)
        sys.exit(2)


def as_lists(value):
    if isinstance(value, (list, tuple)):
        return [as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: as_lists(v) for k, v in value.items()}
    return value


def block_size_fits(requested, block):
    rounded = max(ROUND, (requested + ROUND - 1) // ROUND * ROUND)
    if requested <= SMALL_REQUEST:
        return block == rounded
    return rounded <= block <= rounded + SMALL_REQUEST


def export(c, args):
    paths = {}
    for kind in ("pickle", "json"):
        path = os.path.join(args.work, f"{args.name}.memory_viz.{kind}")
        r = subprocess.run([args.memtrace, "export", "--format", "memory-viz", args.trace, "-o", path],
                           capture_output=True, text=True)
        size = os.path.getsize(path) if os.path.exists(path) else 0
        c.check(f"memtrace export --format memory-viz ({kind}) exit status", 0, r.returncode)
        c.check(f"memory-viz {kind} written", True, size > 0)
        c.info(f"memory-viz {kind}", f"{path}: {size} bytes{(': ' + r.stderr.strip()) if r.stderr.strip() else ''}")
        paths[kind] = path
    return paths


def run_memory_viz(c, args, pickle_path):
    for sub in ("stats", "trace_plot", "segment_plot"):
        out = os.path.join(args.work, f"{args.name}.memory_viz.{sub}.html")
        cmd = [sys.executable, "-m", "torch.cuda._memory_viz", sub, pickle_path]
        if sub != "stats":
            cmd += ["-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        c.check(f"python -m torch.cuda._memory_viz {sub} exit status", 0, r.returncode)
        if r.returncode != 0:
            c.info(f"_memory_viz {sub} stderr", r.stderr.strip().splitlines()[-1:] or "")
        written = len(r.stdout) if sub == "stats" else (os.path.getsize(out) if os.path.exists(out) else 0)
        c.check(f"_memory_viz {sub} output written", True, written > 0)
        if sub == "stats":
            for line in r.stdout.splitlines():
                if line.startswith(("segments:", "total_reserved:", "total_allocated:")):
                    c.info("_memory_viz stats", line)


def block_events(trace):
    return [(e["action"], e["addr"], e["size"]) for e in trace if e["action"] in ("alloc", "free_completed")]


def compare_events(c, torch_snapshot, mine, device):
    theirs = block_events(torch_snapshot["device_traces"][device])
    ours = block_events(mine["device_traces"][device]) if device < len(mine["device_traces"]) else []
    c.check(f"device {device} alloc + free_completed entries (count)", len(theirs), len(ours))
    for action in ("alloc", "free_completed"):
        c.check(f"device {device} {action} entries", sum(a == action for a, _, _ in theirs),
                sum(a == action for a, _, _ in ours))
    first_difference = next((i for i, (t, m) in enumerate(zip(theirs, ours)) if t[:2] != m[:2]), None)
    c.check("first entry whose action or address differs (order)", None,
            None if first_difference is None else
            f"#{first_difference}: PyTorch {theirs[first_difference][:2]}, memtrace {ours[first_difference][:2]}")
    misfits = [(i, t[2], m[2]) for i, (t, m) in enumerate(zip(theirs, ours)) if not block_size_fits(t[2], m[2])]
    c.check("entries whose block size does not fit PyTorch's requested size", [], misfits[:5])
    exact = sum(t[2] == m[2] for t, m in zip(theirs, ours))
    c.info("sizes", f"{exact} of {min(len(theirs), len(ours))} entries equal to the byte, the rest rounded by the allocator")


def live_blocks(snapshot, device):
    blocks = {}
    for seg in snapshot["segments"]:
        if seg["device"] != device:
            continue
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                blocks[addr] = b["size"]
            addr += b["size"]
    return blocks


def compare_segments(c, torch_snapshot, mine, device):
    c.check(f"device {device} live blocks at the end (address: block size)", live_blocks(torch_snapshot, device),
            live_blocks(mine, device))
    theirs = {(s["address"], s["total_size"]) for s in torch_snapshot["segments"] if s["device"] == device}
    ours = {(s["address"], s["total_size"]) for s in mine["segments"] if s["device"] == device}
    c.check(f"device {device} PyTorch's segments missing from memtrace's", [], sorted(theirs - ours))
    outside = [s for s in mine["segments"] if s["device"] == device and s["segment_type"] not in ("large", "small")]
    c.info("segments outside PyTorch's allocator",
           ", ".join(f"{s['segment_type']} {s['total_size']} bytes" for s in outside) or "none")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    for option in ("--trace", "--memtrace", "--torch-snapshot", "--work"):
        parser.add_argument(option, required=True)
    args = parser.parse_args()
    c = Checker(args.name)
    torch_snapshot = load_pickle(args.torch_snapshot, "PyTorch's snapshot")
    paths = export(c, args)
    if c.failed:
        return 1
    mine = load_pickle(paths["pickle"], "memtrace's memory-viz pickle")
    with open(paths["json"]) as f:
        c.check("the JSON holds the pickle's snapshot", True, json.load(f) == as_lists(mine))
    r = subprocess.run([sys.executable, CONSISTENCY, paths["pickle"]], capture_output=True, text=True)
    c.check("consistent for the memory_viz page (memory_viz_check.py)", 0, r.returncode)
    for line in r.stdout.strip().splitlines()[:5]:
        c.info("memory_viz_check", line)
    c.info("memtrace's counts", json.dumps(mine.get("memtrace", {})))
    run_memory_viz(c, args, paths["pickle"])
    devices = [d for d, t in enumerate(torch_snapshot["device_traces"]) if t]
    c.check("devices with PyTorch trace entries", 1, len(devices))
    for device in devices:
        compare_events(c, torch_snapshot, mine, device)
        compare_segments(c, torch_snapshot, mine, device)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
