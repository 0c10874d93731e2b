"""What one PyTorch block allocation costs the allocating thread under memtrace and under PyTorch's own recorder,
measured in processes that run side by side, so that the GPU machine's changes of CPU speed fall on all of them.

    python3 alloc_cost.py run --result R.json --start-unix T [--record none|python|all] [--seconds 15]
                              [--window-ms 250] [--depth 20] [--cpus 2,3]
    python3 alloc_cost.py report none=NONE.json memtrace=MEMTRACE.json python=PYTHON.json [LABEL=R.json ...]

Why: the training loop of gpt_bench.py runs on a virtual machine whose CPU speed changes by up to 2x within
seconds (the same step's CPU time moves from 22 to 38 ms between processes), and every mode runs in a process of
its own, so its step times carry the phase each process happened to meet. Here every mode runs at the same time,
each process on CPUs of its own, counting the allocations it completes in fixed windows of wall-clock time
aligned to one start time; a window's figures from each process are compared with each other, which takes the
machine's phase out of the comparison.

`run`: waits until --start-unix (time.time(); the caller gives every process the same one), then for --seconds
repeats a burst of allocations: torch.empty of 512 B, 64 KiB, 1 MiB and 4 MiB on the GPU, each freed at once
(`del`), made --depth Python frames below the loop. The blocks come from PyTorch's caching allocator (filled
before the start), so no CUDA call is made and each allocation is two allocator events (ALLOC, FREE), the work
every tensor of a training step goes through. --record python|all turns on
torch.cuda.memory._record_memory_history(max_entries=10**7, stacks=...) as gpt_bench.py does; memtrace, when
wanted, is put around the process by the caller. RESULT.json: record, window_ms, events_per_burst, and
bursts_per_window (the bursts completed in each window: window i is [start + i * window_ms, start + (i + 1) *
window_ms)).

`report`: for every window that each process completed (the first two left out as warm-up), the time per
allocator event of each mode (window time / events); then per mode its median over the windows, its ratio to
no profiler in the same window (median over windows), and the per-window overhead (mode minus no profiler),
with memtrace's overhead as a fraction of the recorder's: median over windows of memtrace's overhead divided by
the median of stacks="python"'s. Modes are named LABEL=RESULT.json, `none` first; the labels the report knows
(TITLES) get their titles, others print as given (scripts/gpu-bench adds the tracer's ablations).
"""
import argparse
import json
import os
import statistics
import sys
import time

SIZES_BYTES = (512, 64 << 10, 1 << 20, 4 << 20)
WARMUP_WINDOWS = 2
MAX_ENTRIES = 10**7


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="one mode's allocations, from the start time on")
    run.add_argument("--result", required=True)
    run.add_argument("--start-unix", type=float, required=True, help="time.time() at which to start counting")
    run.add_argument("--record", choices=("none", "python", "all"), default="none")
    run.add_argument("--seconds", type=float, default=15.0)
    run.add_argument("--window-ms", type=int, default=250)
    run.add_argument("--depth", type=int, default=20, help="Python frames between the loop and torch.empty")
    run.add_argument("--cpus", help="comma-separated CPUs to pin the process to (os.sched_setaffinity)")
    report = sub.add_parser("report", help="the comparison of runs that ran side by side")
    report.add_argument("results", nargs="+", help="LABEL=RESULT.json, none first")
    args = parser.parse_args(argv)
    if args.command == "run" and (args.seconds <= 0 or args.window_ms <= 0 or args.depth < 0):
        parser.error("--seconds and --window-ms must be positive and --depth at least 0")
    return args


def at_depth(depth, fn):
    """Calls fn() `depth` Python frames below the caller."""
    return fn() if depth == 0 else at_depth(depth - 1, fn)


def run(args):
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    import torch

    if args.record != "none":
        torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks=args.record)

    def burst():
        for size in SIZES_BYTES:
            x = torch.empty(size, dtype=torch.uint8, device="cuda")
            del x

    burst()  # the allocator's segments are made here, before the start: the timed bursts reuse their blocks
    torch.cuda.synchronize()
    window_s = args.window_ms / 1000.0
    windows = int(args.seconds / window_s)
    counts = [0] * windows
    while time.time() < args.start_unix:
        time.sleep(0.001)
    while True:
        at_depth(args.depth, burst)
        i = int((time.time() - args.start_unix) / window_s)
        if i >= windows:
            break
        counts[i] += 1
    result = {"record": args.record, "window_ms": args.window_ms, "events_per_burst": 2 * len(SIZES_BYTES),
              "depth": args.depth, "bursts_per_window": counts, "torch_version": torch.__version__}
    with open(args.result, "w") as f:
        json.dump(result, f)


def event_ns(result, window):
    """Time per allocator event in `window` (ns), None when the process completed no burst in it."""
    bursts = result["bursts_per_window"][window]
    if bursts == 0:
        return None
    return result["window_ms"] * 1e6 / (bursts * result["events_per_burst"])


def compare(results):
    """{"windows": n, "modes": {record: {...}}, "overhead_fraction": ...} from run results (the first: none)."""
    none = results[0]
    count = min(len(r["bursts_per_window"]) for r in results)
    windows = []
    for w in range(WARMUP_WINDOWS, count):
        ns = [event_ns(r, w) for r in results]
        if None not in ns:
            windows.append(ns)
    out = {"windows": len(windows), "modes": {}}
    if not windows:
        return out
    for i, r in enumerate(results):
        per_window = [w[i] for w in windows]
        overheads = [w[i] - w[0] for w in windows]
        out["modes"][r["label"]] = {
            "median_event_ns": statistics.median(per_window),
            "median_ratio": statistics.median(w[i] / w[0] for w in windows),
            "median_overhead_ns": statistics.median(overheads),
        }
    modes = out["modes"]
    if "memtrace" in modes and "python" in modes and modes["python"]["median_overhead_ns"] > 0:
        out["overhead_fraction"] = modes["memtrace"]["median_overhead_ns"] / modes["python"]["median_overhead_ns"]
    return out


TITLES = {"none": "no profiler", "memtrace": "memtrace run (native + Python stacks)",
          "python": '_record_memory_history(stacks="python")', "all": '_record_memory_history(stacks="all")',
          "memtrace_native": "memtrace, native stacks only", "memtrace_python": "memtrace, Python stacks only",
          "memtrace_nostacks": "memtrace, no stacks"}


def report(specs):
    pairs = [spec.split("=", 1) for spec in specs]
    if len(pairs) < 2 or any(len(p) != 2 for p in pairs) or pairs[0][0] != "none":
        sys.exit("alloc_cost.py report: give none=NONE.json, then LABEL=RESULT.json for each other mode")
    results = []
    for label, path in pairs:
        try:
            with open(path) as f:
                r = json.load(f)
            r["label"] = label
            if not r["bursts_per_window"] or r["window_ms"] <= 0 or r["events_per_burst"] <= 0:
                raise ValueError("no windows")
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit("alloc_cost.py report: %s: not a run result (%s)" % (path, e))
        results.append(r)
    c = compare(results)
    print("allocator events per mode, side by side, %d windows of %d ms (first %d left out), depth %d" % (
        c["windows"], results[0]["window_ms"], WARMUP_WINDOWS, results[0].get("depth", -1)))
    print("%-42s %14s %16s %18s" % ("mode", "ns/event", "vs no profiler", "overhead ns/event"))
    for label, m in c["modes"].items():
        print("%-42s %14.0f %15.2fx %18.0f" % (TITLES.get(label, label), m["median_event_ns"], m["median_ratio"],
                                                 m["median_overhead_ns"]))
    if "overhead_fraction" in c:
        print("memtrace's overhead per event / stacks=\"python\"'s: %.3f" % c["overhead_fraction"])
    return c


def main(argv):
    args = parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        report(args.results)


if __name__ == "__main__":
    main(sys.argv[1:])
