"""The in-process A/B of scripts/gpu-toggle-bench: what the tracer's recording costs a training loop, and what
PyTorch's recorder costs the same loop between the same neighbours.

    python3 toggle_report.py RESULT.json [RESULT.json ...]

Each RESULT.json is one gpt_bench.py --toggle-every N run under libmemtrace-bench-toggle.so: its timed steps
come in blocks of N, each block in one state ("off", "memtrace": the tracer recording, and with --toggle-peer
"recorder": _record_memory_history(stacks="python") on), the blocks in groups holding each state once, next to
each other in time. Per group: the ratio of a state's median step time to the off block's, and the difference of
their median CPU time per step while issuing (every thread); with the recorder, also the tracer's CPU difference
over the recorder's (the issue's "one third of the recorder's overhead"). The report gives the geometric mean of
the ratios, the mean of the differences and the ratio of the summed differences over every group of every run,
each with a 90% interval from resampling the groups (gpu_bench_report.round_bootstrap). A trailing incomplete
group is left out.

What it measures is recording's cost over a hook that forwards only (the off state still runs the hooks): add
the hook's own cost (about 35-60 ns an event on the GPU machine, docs/performance.md) for the tracer's whole cost.
"""
import json
import math
import statistics
import sys

import gpu_bench_report


def block_groups(result):
    """[{state: (median step ms, median CPU ms per step)}], one dict per complete group of blocks of one run."""
    every = result.get("toggle_every") or 0
    state_of_step = result.get("step_state")
    if every < 1 or not state_of_step:
        raise ValueError("not a --toggle-every run (no toggle_every / step_state)")
    steps, cpu = result["step_ms"], result["issue_cpu_ms"]
    blocks = []
    for start in range(0, len(steps) - every + 1, every):
        states = set(state_of_step[start:start + every])
        if len(states) != 1:
            raise ValueError("block at step %d mixes states" % start)
        blocks.append((states.pop(), statistics.median(steps[start:start + every]),
                       statistics.median(cpu[start:start + every])))
    size = len(set(state for state, _, _ in blocks))
    groups = []
    for start in range(0, len(blocks) - size + 1, size):
        group = {state: (step_ms, cpu_ms) for state, step_ms, cpu_ms in blocks[start:start + size]}
        if len(group) != size or "off" not in group:
            raise ValueError("the group of blocks from block %d does not hold each state once" % start)
        groups.append(group)
    return groups


def step_ratio(groups, state):
    """Geometric mean over the groups of the state's median step time over the off block's."""
    if not groups:
        return None
    return math.exp(sum(math.log(g[state][0] / g["off"][0]) for g in groups) / len(groups))


def cpu_difference(groups, state):
    """Mean over the groups of the state's median CPU time per step minus the off block's (ms)."""
    return sum(g[state][1] - g["off"][1] for g in groups) / len(groups) if groups else None


def cpu_fraction(groups):
    """The tracer's CPU time per step over off, summed over the groups, over the recorder's; None where the
    recorder's sum is not positive."""
    peer = sum(g["recorder"][1] - g["off"][1] for g in groups)
    return sum(g["memtrace"][1] - g["off"][1] for g in groups) / peer if peer > 0 else None


def report_lines(groups, every):
    states = sorted(groups[0]) if groups else []
    lines = ["toggle: %d groups of %d-step blocks (%s; next to each other in time)"
             % (len(groups), every, ", ".join(states))]
    specs = []
    for state in ("memtrace", "recorder"):
        if state in states:
            specs += [("step time %s/off" % state, lambda gs, s=state: step_ratio(gs, s), "%.4fx"),
                      ("CPU per step %s-off" % state, lambda gs, s=state: cpu_difference(gs, s), "%+.2f ms")]
    if "recorder" in states:
        specs.append(("CPU (memtrace-off)/(recorder-off)", cpu_fraction, "%.3f"))
    for label, statistic, pattern in specs:
        value = statistic(groups)
        interval = gpu_bench_report.round_bootstrap(groups, statistic)
        lines.append("%-34s %s; 90%% interval, groups resampled: %s" % (
            label, "n/a" if value is None else pattern % value,
            "n/a" if not interval else (pattern + " .. " + pattern) % interval))
    return lines


def main(argv):
    if not argv:
        sys.exit("usage: toggle_report.py RESULT.json [RESULT.json ...]")
    groups, every = [], None
    for path in argv:
        try:
            with open(path) as f:
                result = json.load(f)
            run_groups = block_groups(result)
            if groups and run_groups and set(run_groups[0]) != set(groups[0]):
                raise ValueError("its states differ from the earlier runs'")
            groups += run_groups
        except (OSError, ValueError, KeyError) as error:
            sys.exit("toggle_report.py: %s: %s" % (path, error))
        every = result["toggle_every"]
    print("\n".join(report_lines(groups, every)))


if __name__ == "__main__":
    main(sys.argv[1:])
