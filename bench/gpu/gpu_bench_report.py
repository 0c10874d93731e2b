"""The tables of scripts/gpu-bench, from the runs it made.

    python3 gpu_bench_report.py WORK_DIR

WORK_DIR holds, for every run, RUN.json (written by gpt_bench.py: step_ms, snapshot figures...) where RUN is
ROUND-MODE, and measures.tsv, lines of `ROUND<TAB>MODE<TAB>KEY<TAB>VALUE` that scripts/gpu-bench measured around the
process: trace_bytes, trace_events, dropped_events (memtrace's trace), summary_s (`memtrace summary` wall time),
memviz_stats_s (`python -m torch.cuda._memory_viz stats` wall time), exit_status.

Prints the median step time of every mode over all its steps (all rounds pooled), its ratio to its baseline, the
overhead of memtrace as a fraction of PyTorch recorder's, trace bytes against snapshot bytes, and the time to a
report; then the same as a markdown table for docs/performance.md. A mode whose runs all failed shows as "failed".
"""
import csv
import json
import math
import os
import statistics
import sys
from collections import defaultdict

# mode -> (letter, what it is, the mode its step time is compared with)
MODES = {
    "none": ("a", "no profiler", None),
    "memtrace": ("b", "memtrace run (native + Python stacks)", "none"),
    "history_python": ("c", '_record_memory_history(stacks="python")', "none"),
    "history_all": ("d", '_record_memory_history(stacks="all")', "none"),
    "memtrace_async": ("e", "memtrace run, backend:cudaMallocAsync", "none_async"),
    "none_async": ("f", "no profiler, backend:cudaMallocAsync", None),
}
ORDER = ["none", "memtrace", "history_python", "history_all", "memtrace_async", "none_async"]
# Tracer ablations (GPU_BENCH_MODES): memtrace with one part turned off, each against no profiler.
ABLATIONS = {
    "memtrace_native": "memtrace, native stacks only (MEMTRACE_PYTHON_FRAMES=0)",
    "memtrace_python": "memtrace, Python stacks only (MEMTRACE_MAX_FRAMES=0)",
    "memtrace_nostacks": "memtrace, no stacks (both 0)",
    "memtrace_nonvml": "memtrace, no NVML samples (MEMTRACE_NVML=0)",
    "memtrace_alt": "memtrace of another build (GPU_BENCH_ALT_MEMTRACE)",
}


def load_runs(work):
    """{mode: [run dict, ...]} in round order; a run's dict is its RUN.json plus its measures.tsv lines."""
    measures = defaultdict(dict)
    tsv = os.path.join(work, "measures.tsv")
    if os.path.exists(tsv):
        with open(tsv, newline="") as f:
            for line, row in enumerate(csv.reader(f, delimiter="\t"), 1):
                try:
                    measures[(row[0], row[1])][row[2]] = float(row[3])
                except (IndexError, ValueError):
                    print("gpu_bench_report.py: %s:%d: not ROUND, MODE, KEY, number: %r; left out" % (tsv, line, row),
                          file=sys.stderr)
    keys = set(measures)
    for name in os.listdir(work):
        stem, ext = os.path.splitext(name)
        if ext == ".json" and "-" in stem and (stem.split("-", 1)[1] in MODES or stem.split("-", 1)[1] in ABLATIONS):
            keys.add(tuple(stem.split("-", 1)))
    runs = defaultdict(list)
    for round_, mode in sorted(keys, key=lambda k: (int(k[0]) if k[0].isdigit() else 0, k[1])):
        run = {"round": round_, "mode": mode}
        path = os.path.join(work, "%s-%s.json" % (round_, mode))
        if os.path.exists(path):
            with open(path) as f:
                run.update(json.load(f))
        run.update(measures.get((round_, mode), {}))
        runs[mode].append(run)
    return runs


def quantile(values, q):
    """The q-quantile of values (the lower of the two middle ones: no interpolation), None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))]


def median_of(runs, key):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def mode_figures(runs):
    """{mode: figures} with the pooled median step and the per-run medians of every size and time."""
    figures = {}
    for mode in ORDER + list(ABLATIONS):
        mode_runs = runs.get(mode, [])
        steps = [ms for r in mode_runs for ms in r.get("step_ms", [])]
        figures[mode] = {
            "runs": sum(1 for r in mode_runs if r.get("step_ms")),
            "steps": len(steps),
            "median_step_ms": statistics.median(steps) if steps else None,
            "p25_step_ms": quantile(steps, 0.25),
            "median_issue_ms": quantile([ms for r in mode_runs for ms in r.get("issue_ms", [])], 0.5),
            "median_issue_cpu_ms": quantile([ms for r in mode_runs for ms in r.get("issue_cpu_ms", [])], 0.5),
            "round_medians_ms": [r["median_step_ms"] for r in mode_runs if r.get("median_step_ms") is not None],
            "backend": next((r["allocator_backend"] for r in mode_runs if r.get("allocator_backend")), None),
        }
        for key in ("trace_bytes", "trace_events", "dropped_events", "summary_s", "snapshot_bytes",
                    "snapshot_entries", "dump_snapshot_s", "memviz_stats_s", "max_memory_allocated_bytes",
                    "python_frames_version", "allocator_layer", "wall_s"):
            figures[mode][key] = median_of(mode_runs, key)
    return figures


def ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def overhead_fraction(figures):
    """(b - a) / (c - a): memtrace's added step time as a fraction of _record_memory_history(stacks="python")'s."""
    a, b, c = (figures[m]["median_step_ms"] for m in ("none", "memtrace", "history_python"))
    if None in (a, b, c) or c - a <= 0:
        return None
    return (b - a) / (c - a)


def round_medians(runs, key="step_ms"):
    """{mode: {round: median of the run's `key` list}} for every run that has one (step_ms: wall time per step;
    issue_cpu_ms: CPU time per step of every thread while the step is issued)."""
    return {mode: {r["round"]: statistics.median(r[key]) for r in mode_runs if r.get(key)}
            for mode, mode_runs in runs.items()}


def common_rounds(medians, modes):
    """The rounds in which every one of `modes` ran, in order."""
    sets = [set(medians.get(m, {})) for m in modes]
    rounds = set.intersection(*sets) if sets else set()
    return sorted(rounds, key=lambda x: (int(x) if str(x).isdigit() else 0, str(x)))


def paired_ratio(medians, mode, base, rounds):
    """Geometric mean over `rounds` of each round's median step of `mode` over that of `base`.

    Rounds pair the modes: each runs once per round, next to the others in time, so a round's ratio carries
    little of the machine's drift between rounds, which a ratio of medians pooled over rounds of different
    speeds does (the pooled ratio can fall outside every round's own)."""
    if not rounds:
        return None
    return math.exp(sum(math.log(medians[mode][r] / medians[base][r]) for r in rounds) / len(rounds))


def paired_fraction(medians, rounds):
    """(b/a - 1) / (c/a - 1) of the paired ratios: memtrace's overhead as a fraction of the recorder's."""
    b = paired_ratio(medians, "memtrace", "none", rounds)
    c = paired_ratio(medians, "history_python", "none", rounds)
    if b is None or c is None or c <= 1:
        return None
    return (b - 1) / (c - 1)


def paired_difference(medians, mode, base, rounds):
    """Mean over `rounds` of each round's median of `mode` minus that of `base` (ms per step)."""
    if not rounds:
        return None
    return sum(medians[mode][r] - medians[base][r] for r in rounds) / len(rounds)


def paired_cpu_fraction(cpu_medians, rounds):
    """(b - a) / (c - a) of the CPU time per step, each difference paired by round: the tracer's CPU cost as a
    fraction of the recorder's. The step time hides CPU cost while the CPU runs ahead of the GPU; the CPU time
    spent issuing a step shows all of it, with less of the machine's noise."""
    b = paired_difference(cpu_medians, "memtrace", "none", rounds)
    c = paired_difference(cpu_medians, "history_python", "none", rounds)
    if b is None or c is None or c <= 0:
        return None
    return b / c


def bootstrap_interval(resample, statistic, draws=2000, seed=1):
    """The 5th and 95th percentiles of statistic(resample(rng)) over `draws` resamplings, or None when the
    statistic is undefined (None) in most draws. The seed is fixed, so a report is reproducible from its runs."""
    import random
    rng = random.Random(seed)
    values = []
    for _ in range(draws):
        value = statistic(resample(rng))
        if value is not None:
            values.append(value)
    if len(values) < draws // 2:
        return None
    values.sort()
    return values[int(0.05 * (len(values) - 1))], values[int(0.95 * (len(values) - 1))]


def round_bootstrap(rounds, statistic, draws=2000, seed=1):
    """The 5th and 95th percentiles of statistic(picked rounds) over `draws` resamplings of `rounds` with
    replacement, or None (fewer than 2 rounds, or the statistic undefined in most draws). With few rounds there
    are few distinct draws (10 for 3 rounds) and the interval is about the range of the rounds' own values: the
    report says how many rounds it had."""
    if len(rounds) < 2:
        return None
    return bootstrap_interval(lambda rng: [rng.choice(rounds) for _ in rounds], statistic, draws, seed)


def paired_lines(runs):
    """b/a, c/a and (b-a)/(c-a) paired by round, each with its round-resampled 90% interval."""
    medians = round_medians(runs)
    cpu = round_medians(runs, "issue_cpu_ms")
    lines = []
    specs = (("b/a", ("memtrace", "none"), lambda rs: paired_ratio(medians, "memtrace", "none", rs), "%.3fx"),
             ("c/a", ("history_python", "none"), lambda rs: paired_ratio(medians, "history_python", "none", rs),
              "%.3fx"),
             ("e/f", ("memtrace_async", "none_async"),
              lambda rs: paired_ratio(medians, "memtrace_async", "none_async", rs), "%.3fx"),
             ("(b-a)/(c-a)", ("none", "memtrace", "history_python"), lambda rs: paired_fraction(medians, rs), "%.3f"),
             ("CPU b-a", ("memtrace", "none"), lambda rs: paired_difference(cpu, "memtrace", "none", rs),
              "%+.2f ms/step"),
             ("CPU c-a", ("history_python", "none"), lambda rs: paired_difference(cpu, "history_python", "none", rs),
              "%+.2f ms/step"),
             ("CPU (b-a)/(c-a)", ("none", "memtrace", "history_python"), lambda rs: paired_cpu_fraction(cpu, rs),
              "%.3f"))
    for label, modes, statistic, pattern in specs:
        rounds = common_rounds(cpu if label.startswith("CPU") else medians, modes)
        value = statistic(rounds) if rounds else None
        if value is None:
            continue
        interval = round_bootstrap(rounds, statistic)
        lines.append("%-15s paired by round: %s over %d rounds; 90%% interval, rounds resampled: %s" % (
            label, pattern % value, len(rounds),
            "n/a" if not interval else (pattern + " .. " + pattern) % interval))
    if lines:
        lines.append("(paired: the geometric mean of each round's ratio of median steps; CPU: the mean of each round's "
                     "difference of median CPU time per step while issuing, every thread; with fewer than about 8 "
                     "rounds an interval is about the range of the rounds' own values)")
    return lines


def fmt(value, pattern):
    return "n/a" if value is None else pattern % value


def report_time_s(f):
    """Time to a report: `memtrace summary` for a trace; _dump_snapshot + `_memory_viz stats` for a snapshot."""
    if f["summary_s"] is not None:
        return f["summary_s"]
    if f["dump_snapshot_s"] is not None and f["memviz_stats_s"] is not None:
        return f["dump_snapshot_s"] + f["memviz_stats_s"]
    return None


def record_figures(f):
    """(bytes on disk, events or entries recorded, bytes per event) of a mode's trace or snapshot."""
    if f["trace_bytes"] is not None:
        size, count = f["trace_bytes"], f["trace_events"]
    else:
        size, count = f["snapshot_bytes"], f["snapshot_entries"]
    return size, count, ratio(size, count)


def plain_table(figures):
    lines = ["%-2s %-42s %-16s %5s %7s %10s %7s %12s %10s %8s %9s"
             % ("", "mode", "backend", "runs", "steps", "median_ms", "ratio", "record_B", "events", "B/event",
                "report_s")]
    for mode in ORDER:
        letter, title, base = MODES[mode]
        f = figures[mode]
        size, count, per_event = record_figures(f)
        step = f["median_step_ms"]
        base_step = figures[base]["median_step_ms"] if base else step
        lines.append("%-2s %-42s %-16s %5d %7d %10s %7s %12s %10s %8s %9s" % (
            letter, title, f["backend"] or "n/a", f["runs"], f["steps"],
            fmt(step, "%.2f") if step is not None else "failed", fmt(ratio(step, base_step), "%.3fx"),
            fmt(size, "%d"), fmt(count, "%d"), fmt(per_event, "%.2f"), fmt(report_time_s(f), "%.2f")))
    return lines


def summary_lines(figures):
    a, b, c, d, e, f_ = (figures[m] for m in ORDER)
    lines = [
        "b/a  memtrace vs no profiler:                   %s" % fmt(ratio(b["median_step_ms"], a["median_step_ms"]), "%.3fx"),
        "c/a  record_memory_history(python) vs none:     %s" % fmt(ratio(c["median_step_ms"], a["median_step_ms"]), "%.3fx"),
        "d/a  record_memory_history(all) vs none:        %s" % fmt(ratio(d["median_step_ms"], a["median_step_ms"]), "%.3fx"),
        "e/f  memtrace vs none, backend:cudaMallocAsync: %s" % fmt(ratio(e["median_step_ms"], f_["median_step_ms"]), "%.3fx"),
        "(b-a)/(c-a)  memtrace's overhead / recorder's:  %s" % fmt(overhead_fraction(figures), "%.3f"),
        "snapshot bytes / memtrace trace bytes: stacks=python %s, stacks=all %s (both: the whole process)" % (
            fmt(ratio(c["snapshot_bytes"], b["trace_bytes"]), "%.1fx"),
            fmt(ratio(d["snapshot_bytes"], b["trace_bytes"]), "%.1fx")),
        "per-round medians (ms): " + "; ".join(
            "%s %s" % (MODES[m][0], ", ".join("%.2f" % v for v in figures[m]["round_medians_ms"]) or "n/a")
            for m in ORDER),
    ]
    for m in ("memtrace", "memtrace_async"):
        version = figures[m]["python_frames_version"]
        layer = figures[m]["allocator_layer"]
        lines.append("%s: Python frames %s; PyTorch's allocator layer %s" % (
            MODES[m][1], "n/a" if version is None else "not read" if version == 0 else
            "read (CPython %d.%d)" % (int(version) >> 24, (int(version) >> 16) & 0xFF),
            "n/a" if layer is None else "seen" if layer else "not seen (every tensor at the driver level)"))
    lines.append("p25 step (ms; phases when every mode's steps are slower push up the median, not the lower quartile): "
                 + "; ".join("%s %s" % (MODES[m][0], fmt(figures[m]["p25_step_ms"], "%.2f")) for m in ORDER))
    lines.append("p25 ratios: b/a %s, c/a %s, d/a %s, e/f %s" % tuple(
        fmt(ratio(figures[x]["p25_step_ms"], figures[y]["p25_step_ms"]), "%.3fx")
        for x, y in (("memtrace", "none"), ("history_python", "none"), ("history_all", "none"),
                     ("memtrace_async", "none_async"))))
    lines.append("issue time per step (ms, median; wall until step() returns, before the closing synchronize): " +
                 "; ".join("%s %s" % (MODES[m][0], fmt(figures[m]["median_issue_ms"], "%.2f")) for m in ORDER))
    lines.append("CPU time per step while issuing (ms, median; every thread of the process): " +
                 "; ".join("%s %s" % (MODES[m][0], fmt(figures[m]["median_issue_cpu_ms"], "%.2f")) for m in ORDER))
    lines.append("process wall time (s, median of runs): " + "; ".join(
        "%s %s" % (MODES[m][0], fmt(figures[m]["wall_s"], "%.1f")) for m in ORDER))
    dropped = [m for m in ("memtrace", "memtrace_async") if figures[m]["dropped_events"]]
    for m in dropped:
        lines.append("WARNING: %s dropped %d events (MEMTRACE_FULL_BUFFER=drop): its step time is understated"
                     % (m, figures[m]["dropped_events"]))
    return lines


def ablation_lines(figures, runs=None):
    """One line per ablation mode that ran: its median step and its ratio to no profiler, and, given the runs,
    its CPU time per step over no profiler's paired by round (as paired_lines' "CPU b-a")."""
    cpu = round_medians(runs, "issue_cpu_ms") if runs else {}
    lines = []
    for mode, title in ABLATIONS.items():
        f = figures[mode]
        if not f["steps"]:
            continue
        a = figures["none"]
        rounds = common_rounds(cpu, (mode, "none")) if cpu else []
        paired = paired_difference(cpu, mode, "none", rounds) if rounds else None
        lines.append("%-58s median %s ms %s of a; p25 %s ms %s; issue CPU %s ms %s, paired %s over %d rounds "
                     "(rounds: %s)" % (
            title, fmt(f["median_step_ms"], "%.2f"), fmt(ratio(f["median_step_ms"], a["median_step_ms"]), "%.3fx"),
            fmt(f["p25_step_ms"], "%.2f"), fmt(ratio(f["p25_step_ms"], a["p25_step_ms"]), "%.3fx"),
            fmt(f["median_issue_cpu_ms"], "%.2f"), fmt(ratio(f["median_issue_cpu_ms"], a["median_issue_cpu_ms"]), "%.3fx"),
            fmt(paired, "%+.2f ms/step"), len(rounds), ", ".join("%.2f" % v for v in f["round_medians_ms"])))
    return lines


def markdown_table(figures):
    lines = ["| | mode | allocator | median step | vs baseline | trace / snapshot | events / entries | "
             "bytes per event | time to report |",
             "|---|---|---|---|---|---|---|---|---|"]
    for mode in ORDER:
        letter, title, base = MODES[mode]
        f = figures[mode]
        size, count, per_event = record_figures(f)
        step = f["median_step_ms"]
        vs = ratio(step, figures[base]["median_step_ms"]) if base else 1.0 if step is not None else None
        how = ""
        if f["summary_s"] is not None:
            how = " (`memtrace summary`)"
        elif f["dump_snapshot_s"] is not None:
            how = " (dump %.2f s + `_memory_viz stats` %s)" % (f["dump_snapshot_s"], fmt(f["memviz_stats_s"], "%.2f s"))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            letter, title, f["backend"] or "n/a", fmt(step, "%.2f ms"),
            fmt(vs, "%.3fx") + ("" if not base else " of " + MODES[base][0]),
            fmt(size / 1e6 if size is not None else None, "%.2f MB"), "n/a" if count is None else "{:,}".format(int(count)),
            fmt(per_event, "%.1f B"), fmt(report_time_s(f), "%.2f s") + how))
    return lines


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: gpu_bench_report.py WORK_DIR")
    work = argv[0]
    if not os.path.isdir(work):
        sys.exit("gpu_bench_report.py: %s: not a directory" % work)
    runs = load_runs(work)
    figures = mode_figures(runs)
    print("\n".join(plain_table(figures)))
    print()
    print("\n".join(summary_lines(figures)))
    print()
    intervals = paired_lines(runs)
    if intervals:
        print("\n".join(intervals))
        print()
    ablations = ablation_lines(figures, runs)
    if ablations:
        print("\n".join(ablations))
        print()
    print("\n".join(markdown_table(figures)))
    with open(os.path.join(work, "figures.json"), "w") as f:
        json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
