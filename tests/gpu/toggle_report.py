"""The in-process A/B of scripts/gpu-toggle-bench: what the tracer's recording costs a training loop.

    python3 toggle_report.py RESULT.json [RESULT.json ...]

Each RESULT.json is one gpt_bench.py --toggle-every N run under libmemtrace-bench-toggle.so: its timed steps
come in blocks of N, recording on or off by block (on, off, off, on, ...), so blocks 2k and 2k+1 are a pair with
one of each, next to each other in time. Per pair: the ratio of the on block's median step time to the off
block's, and the difference of their median CPU time per step while issuing (every thread). The report gives
the geometric mean of the ratios and the mean of the differences over every pair of every run, each with a 90%
interval from resampling the pairs (gpu_bench_report.round_bootstrap). A trailing block without its partner is
left out.

What it measures is recording's cost over a hook that forwards only (the off state still runs the hooks): add
the hook's own cost (about 35-60 ns an event on the GPU machine, docs/performance.md) for the tracer's whole cost.
"""
import json
import math
import statistics
import sys

import gpu_bench_report


def block_pairs(result):
    """[(on_step_ms, off_step_ms, on_cpu_ms, off_cpu_ms)] medians per pair of blocks of one run."""
    every = result.get("toggle_every") or 0
    recording = result.get("step_recording")
    if every < 1 or not recording:
        raise ValueError("not a --toggle-every run (no toggle_every / step_recording)")
    steps, cpu = result["step_ms"], result["issue_cpu_ms"]
    blocks = []
    for start in range(0, len(steps) - every + 1, every):
        states = set(recording[start:start + every])
        if len(states) != 1:
            raise ValueError("block at step %d mixes recording states" % start)
        blocks.append((states.pop(), statistics.median(steps[start:start + every]),
                       statistics.median(cpu[start:start + every])))
    pairs = []
    for first, second in zip(blocks[0::2], blocks[1::2]):
        if first[0] == second[0]:
            raise ValueError("a pair of blocks with the same recording state")
        on, off = (first, second) if first[0] else (second, first)
        pairs.append((on[1], off[1], on[2], off[2]))
    return pairs


def step_ratio(pairs):
    """Geometric mean of on/off median step time over the pairs."""
    return math.exp(sum(math.log(on / off) for on, off, _, _ in pairs) / len(pairs)) if pairs else None


def cpu_difference(pairs):
    """Mean of on - off median CPU time per step (ms) over the pairs."""
    return sum(on - off for _, _, on, off in pairs) / len(pairs) if pairs else None


def report_lines(pairs, every):
    lines = ["toggle: %d pairs of %d-step blocks (recording on / off, next to each other in time)" % (len(pairs), every)]
    for label, statistic, pattern in (("step time on/off", step_ratio, "%.4fx"),
                                      ("CPU per step on-off", cpu_difference, "%+.2f ms")):
        value = statistic(pairs)
        interval = gpu_bench_report.round_bootstrap(pairs, statistic)
        lines.append("%-20s %s; 90%% interval, pairs resampled: %s" % (
            label, "n/a" if value is None else pattern % value,
            "n/a" if not interval else (pattern + " .. " + pattern) % interval))
    return lines


def main(argv):
    if not argv:
        sys.exit("usage: toggle_report.py RESULT.json [RESULT.json ...]")
    pairs, every = [], None
    for path in argv:
        try:
            with open(path) as f:
                result = json.load(f)
            pairs += block_pairs(result)
        except (OSError, ValueError, KeyError) as error:
            sys.exit("toggle_report.py: %s: %s" % (path, error))
        every = result["toggle_every"]
    print("\n".join(report_lines(pairs, every)))


if __name__ == "__main__":
    main(sys.argv[1:])
