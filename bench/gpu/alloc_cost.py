"""What one PyTorch block allocation costs the allocating thread under memtrace and under PyTorch's own recorder,
measured in processes that run side by side and take turns on the same CPUs.

    python3 alloc_cost.py run --result R.json --start-unix T --cpu-sets "2,3;4,5;6,7" --slot K
                              [--record none|python|all] [--segment-s 3] [--window-ms 250] [--depth 20]
    python3 alloc_cost.py report none=NONE.json memtrace=MEMTRACE.json python=PYTHON.json [LABEL=R.json ...]

Why: the training loop of gpt_bench.py runs on a virtual machine whose CPU speed changes by up to 2x within
seconds (the same step's CPU time moves from 22 to 38 ms between processes), and each of its modes runs in a
process of its own, so its step times carry whatever phase that process met. Here every mode runs at the same
time, so a phase of the machine falls on all of them in the same window. The CPUs themselves are not alike
either (measured: a process on one pair of CPUs ran a third faster than the same one on another pair), so the
processes take turns on them: the run is cut into as many segments as there are CPU sets, and in segment s the
process of slot k runs on CPU set (k + s) mod n, a Latin square: every mode spends one segment on every set.

`run`: allocates, freeing at once, torch.empty of 512 B, 64 KiB, 1 MiB and 4 MiB on the GPU (a burst), --depth
Python frames below the loop: for the last 2 s before --start-unix (time.time(); the caller gives every process
the same one) as warm-up, which also fills PyTorch's caching allocator so that no CUDA call is made later, then
for n segments of --segment-s, counting the bursts completed in each --window-ms window. Each allocation is
two allocator events (ALLOC, FREE), the path of every tensor of a training step. --record python|all turns on
torch.cuda.memory._record_memory_history(max_entries=10**7, stacks=...) as gpt_bench.py does; memtrace, when
wanted, is put around the process by the caller. RESULT.json: record, window_ms, windows_per_segment,
events_per_burst, depth, bursts_per_window (window i is [start + i * window_ms, start + (i + 1) * window_ms)),
cpu_set_count, slot, warmup_bursts, process_cpu_s.

RESULT.json also holds the process's CPU time over the counted windows (every thread: a tracer's writer too,
which the per-window figures of the allocating thread do not see), the warm-up bursts and the slot.

`report`: the time per event of a mode in a window is window time / events. The comparison with no profiler
is by logarithms, so that a CPU set's speed (a factor) cancels: for each segment the mean over its windows
(the first, right after the move to other CPUs, left out) of log(mode's time / no profiler's time), then the
mean over segments, exponentiated: the mode's ratio to no profiler with every CPU set weighted alike. A
mode's overhead per event is (ratio - 1) x no profiler's median time per event, and memtrace's as a fraction
of the recorder's is (ratio_memtrace - 1) / (ratio_python - 1). The labels the report knows (TITLES) get
their titles; scripts/gpu-bench also runs the tracer's ablations.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

SIZES_BYTES = (512, 64 << 10, 1 << 20, 4 << 20)
MAX_ENTRIES = 10**7
WARMUP_S = 2.0
TITLES = {"none": "no profiler", "memtrace": "memtrace run (native + Python stacks)",
          "python": '_record_memory_history(stacks="python")', "all": '_record_memory_history(stacks="all")',
          "memtrace_native": "memtrace, native stacks only", "memtrace_python": "memtrace, Python stacks only",
          "memtrace_nostacks": "memtrace, no stacks"}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="one mode's allocations, from the start time on")
    run.add_argument("--result", required=True)
    run.add_argument("--start-unix", type=float, required=True, help="time.time() at which to start counting")
    run.add_argument("--cpu-sets", required=True, help='CPU sets to take turns on: "2,3;4,5;..."')
    run.add_argument("--slot", type=int, required=True, help="this process's slot: its CPU set in segment 0")
    run.add_argument("--record", choices=("none", "python", "all"), default="none")
    run.add_argument("--segment-s", type=float, default=3.0)
    run.add_argument("--window-ms", type=int, default=250)
    run.add_argument("--depth", type=int, default=20, help="Python frames between the loop and torch.empty")
    report = sub.add_parser("report", help="the comparison of runs that ran side by side")
    report.add_argument("results", nargs="+", help="LABEL=RESULT.json, none first")
    args = parser.parse_args(argv)
    if args.command == "run":
        args.cpu_sets = [{int(c) for c in s.split(",")} for s in args.cpu_sets.split(";")]
        windows_per_segment = int(args.segment_s * 1000 / args.window_ms) if args.window_ms > 0 else 0
        if windows_per_segment < 2 or args.depth < 0 or not 0 <= args.slot < len(args.cpu_sets):
            parser.error("--segment-s must hold 2 or more windows, --depth be at least 0 and --slot name a CPU set")
    return args


def cpu_set_index(slot, segment, count):
    """The CPU set of the process in `slot` during `segment`: the Latin square's (slot + segment) mod count."""
    return (slot + segment) % count


def pin_process(cpus):
    """Moves every thread of this process to `cpus`: sched_setaffinity(0) would move only the calling thread,
    and the tracer's writer thread or PyTorch's would stay on the CPUs another mode moves to."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # a thread that ended meanwhile
            pass


def at_depth(depth, fn):
    """Calls fn() `depth` Python frames below the caller."""
    return fn() if depth == 0 else at_depth(depth - 1, fn)


def run(args):
    n = len(args.cpu_sets)
    pin_process(args.cpu_sets[cpu_set_index(args.slot, 0, n)])
    import torch

    if args.record != "none":
        torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks=args.record)

    def burst():
        for size in SIZES_BYTES:
            x = torch.empty(size, dtype=torch.uint8, device="cuda")
            del x

    burst()
    torch.cuda.synchronize()
    # Warm-up: the last WARMUP_S before the start (stacks seen for the first time, caches filled), no more, so
    # that the recorder's ring of MAX_ENTRIES holds the whole run without evicting.
    time.sleep(max(0.0, args.start_unix - WARMUP_S - time.time()))
    pin_process(args.cpu_sets[cpu_set_index(args.slot, 0, n)])  # the threads started since, too
    warmup_bursts = 0
    while time.time() < args.start_unix:
        at_depth(args.depth, burst)
        warmup_bursts += 1
    window_s = args.window_ms / 1000.0
    per_segment = int(args.segment_s * 1000 / args.window_ms)
    counts = [0] * (per_segment * n)
    segment = 0
    cpu_start_s = time.process_time()
    while True:
        at_depth(args.depth, burst)
        i = int((time.time() - args.start_unix) / window_s)
        if i >= len(counts):
            break
        if i // per_segment != segment:
            segment = i // per_segment
            pin_process(args.cpu_sets[cpu_set_index(args.slot, segment, n)])
        counts[i] += 1
    process_cpu_s = time.process_time() - cpu_start_s
    result = {"record": args.record, "window_ms": args.window_ms, "windows_per_segment": per_segment,
              "cpu_set_count": n, "slot": args.slot, "warmup_bursts": warmup_bursts,
              "events_per_burst": 2 * len(SIZES_BYTES), "depth": args.depth, "bursts_per_window": counts,
              "process_cpu_s": process_cpu_s, "torch_version": torch.__version__}
    with open(args.result, "w") as f:
        json.dump(result, f)


def event_ns(result, window):
    """Time per allocator event in `window` (ns), None when the process completed no burst in it."""
    bursts = result["bursts_per_window"][window]
    if bursts == 0:
        return None
    return result["window_ms"] * 1e6 / (bursts * result["events_per_burst"])


def compare(results):
    """{"segments": n, "modes": {label: {...}}, "overhead_fraction": ...} from run results (the first: none).

    A window counts when every process completed a burst in it; a segment counts when it has such a window
    after its first (so that every segment that counts weighs the same in the mean over segments).
    """
    per_segment = results[0]["windows_per_segment"]
    count = min(len(r["bursts_per_window"]) for r in results)
    segments = []  # per segment: per mode, the mean of log(t_mode / t_none) over the segment's windows
    none_ns = []
    for start in range(0, count - per_segment + 1, per_segment):
        logs = [[] for _ in results]
        for w in range(start + 1, start + per_segment):
            ns = [event_ns(r, w) for r in results]
            if None in ns:
                continue
            none_ns.append(ns[0])
            for i, t in enumerate(ns):
                logs[i].append(math.log(t / ns[0]))
        if logs[0]:
            segments.append([sum(x) / len(x) for x in logs])
    out = {"segments": len(segments), "segments_run": count // per_segment, "modes": {}}
    if not segments:
        return out
    base_ns = statistics.median(none_ns)
    for i, r in enumerate(results):
        ratio = math.exp(sum(s[i] for s in segments) / len(segments))
        out["modes"][r["label"]] = {"ratio": ratio, "overhead_ns": (ratio - 1) * base_ns, "event_ns": ratio * base_ns,
                                    "segment_ratios": [math.exp(s[i]) for s in segments]}
        events = sum(r["bursts_per_window"]) * r["events_per_burst"]
        if r.get("process_cpu_s") is not None and events:
            out["modes"][r["label"]]["process_cpu_ns_per_event"] = r["process_cpu_s"] * 1e9 / events
    modes = out["modes"]
    if "memtrace" in modes and "python" in modes and modes["python"]["ratio"] > 1:
        out["overhead_fraction"] = (modes["memtrace"]["ratio"] - 1) / (modes["python"]["ratio"] - 1)
    return out


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
            if not r["bursts_per_window"] or r["window_ms"] <= 0 or r["events_per_burst"] <= 0 or \
                    r["windows_per_segment"] < 2:
                raise ValueError("no windows")
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit("alloc_cost.py report: %s: not a run result (%s)" % (path, e))
        results.append(r)
    for key in ("window_ms", "windows_per_segment", "events_per_burst", "cpu_set_count"):
        if len({r.get(key) for r in results}) != 1:
            sys.exit("alloc_cost.py report: the results differ in %s: they are not one side-by-side run" % key)
    c = compare(results)
    print("allocator events, modes side by side taking turns on CPU sets, %d of %d segments of %d windows of "
          "%d ms counted, Python depth %d" % (c["segments"], c["segments_run"], results[0]["windows_per_segment"],
                                              results[0]["window_ms"], results[0].get("depth", -1)))
    if not c["segments"]:
        sys.exit("alloc_cost.py report: no segment in which every process completed a burst: nothing to compare")
    print("%-42s %10s %14s %18s %17s %16s" % ("mode", "ns/event", "vs no profiler", "segments min..max",
                                               "overhead ns/event", "process CPU ns"))
    for label, m in c["modes"].items():
        cpu = m.get("process_cpu_ns_per_event")
        print("%-42s %10.0f %13.3fx %8.3f..%-8.3f %17.0f %16s" % (
            TITLES.get(label, label), m["event_ns"], m["ratio"], min(m["segment_ratios"]), max(m["segment_ratios"]),
            m["overhead_ns"], "n/a" if cpu is None else "%.0f" % cpu))
    if "overhead_fraction" in c:
        print("memtrace's overhead per event / stacks=\"python\"'s: %.3f" % c["overhead_fraction"])
    if c["segments"] < c["segments_run"]:
        print("WARNING: %d of %d segments had a window without a burst in some process: the CPU sets' speeds do not "
              "cancel exactly" % (c["segments_run"] - c["segments"], c["segments_run"]))
    short = [r["label"] for r in results if r.get("warmup_bursts") == 0]
    if short:
        print("WARNING: no warm-up burst before the start in: %s (started late)" % ", ".join(short))
    return c


def main(argv):
    args = parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        report(args.results)


if __name__ == "__main__":
    main(sys.argv[1:])
