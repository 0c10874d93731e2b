"""The in-process A/B of scripts/gpu-toggle-bench: what the tracer's recording costs a training loop, at one or
more settings, and what PyTorch's recorder costs the same loop between the same neighbours.

    python3 toggle_report.py RESULT.json [RESULT.json ...]

Each RESULT.json is one gpt_bench.py --toggle-every N run under libmemtrace-bench-toggle.so: its timed steps
come in blocks of N, each block in one of the run's toggle_states ("off"; "memtrace": the tracer recording;
"memtraceK": recording with K native frames under Python; "recorder": _record_memory_history(stacks="python")),
the blocks in groups holding each state once, next to each other in time. Per group and state: the ratio of the
block's step time to the off block's, and the difference of their CPU time per step while issuing (every
thread); with the recorder, also each tracer state's CPU difference over the recorder's (the issue's "one third
of the recorder's overhead"). Over the groups of every run: the geometric mean of the ratios, the mean of the
differences, the ratio of the summed differences.

Two estimators of a block: the mean of its steps (the primary one: the tracer's writer thread compresses and
writes every flush interval, on one or two steps of a block, and a block's mean counts that cost while its median
drops it; the recorder does all its work in line) and the median (robust to a step the machine slowed). The 90%
intervals resample runs, then groups within each run drawn (a run's groups share its process and its machine
phase, so they are not independent draws). A trailing incomplete group is left out.

What it measures is recording's cost over a hook that forwards only (the off state still runs the hooks): add
the hook's own cost (about 35-60 ns an event on the GPU machine, docs/performance.md) for the tracer's whole cost.
"""
import json
import math
import statistics
import sys

import gpu_bench_report

# A block's figures: (step ms, CPU ms per step) by the estimator's index in ESTIMATORS.
ESTIMATORS = ("mean", "median")


def block_figures(step_ms, cpu_ms):
    """{estimator: (step ms, CPU ms)} of one block's steps."""
    return {"mean": (statistics.fmean(step_ms), statistics.fmean(cpu_ms)),
            "median": (statistics.median(step_ms), statistics.median(cpu_ms))}


def run_states(result):
    """The run's states, in the order gpt_bench.py was given them. Runs of the first version of the tool (the
    fourth session of 2026-11-30) name them by toggle_peer instead."""
    states = result.get("toggle_states")
    if states is None and "toggle_peer" in result:
        states = ["memtrace", "off"] + (["recorder"] if result["toggle_peer"] == "python" else [])
    if not states or "off" not in states:
        raise ValueError("not a --toggle-every run (no toggle_states with off)")
    return states


def block_groups(result):
    """[{state: {estimator: (step ms, CPU ms)}}], one dict per complete group of blocks of one run."""
    every = result.get("toggle_every") or 0
    state_of_step = result.get("step_state")
    if every < 1 or not state_of_step:
        raise ValueError("not a --toggle-every run (no toggle_every / step_state)")
    size = len(run_states(result))
    steps, cpu = result["step_ms"], result["issue_cpu_ms"]
    blocks = []
    for start in range(0, len(steps) - every + 1, every):
        states = set(state_of_step[start:start + every])
        if len(states) != 1:
            raise ValueError("block at step %d mixes states" % start)
        blocks.append((states.pop(), block_figures(steps[start:start + every], cpu[start:start + every])))
    groups = []
    for start in range(0, len(blocks) - size + 1, size):
        group = {state: figures for state, figures in blocks[start:start + size]}
        if len(group) != size or set(group) != set(run_states(result)):
            raise ValueError("the group of blocks from block %d does not hold each state once" % start)
        groups.append(group)
    return groups


def step_ratio(groups, state, estimator="mean"):
    """Geometric mean over the groups of the state's step time over the off block's."""
    if not groups:
        return None
    return math.exp(sum(math.log(g[state][estimator][0] / g["off"][estimator][0]) for g in groups) / len(groups))


def cpu_difference(groups, state, estimator="mean"):
    """Mean over the groups of the state's CPU time per step minus the off block's (ms)."""
    return sum(g[state][estimator][1] - g["off"][estimator][1] for g in groups) / len(groups) if groups else None


def cpu_fraction(groups, state, estimator="mean"):
    """The state's CPU time per step over off, summed over the groups, over the recorder's; None where the
    recorder's sum is not positive."""
    peer = sum(g["recorder"][estimator][1] - g["off"][estimator][1] for g in groups)
    return cpu_difference(groups, state, estimator) * len(groups) / peer if peer > 0 else None


def cluster_bootstrap(runs, statistic, draws=2000, seed=1):
    """The 5th and 95th percentiles of statistic(groups) over `draws` resamplings: runs drawn with replacement,
    then each drawn run's groups drawn with replacement. None with fewer than 2 groups in all, or the statistic
    undefined in most draws (gpu_bench_report.bootstrap_interval)."""
    if sum(len(run) for run in runs) < 2:
        return None

    def resample(rng):
        groups = []
        for run in (rng.choice(runs) for _ in runs):
            groups += [rng.choice(run) for _ in run]
        return groups

    return gpu_bench_report.bootstrap_interval(resample, statistic, draws, seed)


def specs(states):
    """(label, statistic(groups, estimator), pattern) of every line the states call for."""
    lines = []
    for state in (s for s in states if s != "off"):
        lines += [("step time %s/off" % state, lambda gs, e, s=state: step_ratio(gs, s, e), "%.4fx"),
                  ("CPU per step %s-off" % state, lambda gs, e, s=state: cpu_difference(gs, s, e), "%+.2f ms")]
    if "recorder" in states:
        for state in (s for s in states if s.startswith("memtrace")):
            lines.append(("CPU (%s-off)/(recorder-off)" % state,
                          lambda gs, e, s=state: cpu_fraction(gs, s, e), "%.3f"))
    return lines


def report_lines(runs, states, every):
    """runs: [[group, ...] per run]."""
    groups = [g for run in runs for g in run]
    lines = ["toggle: %d runs, %d groups of %d-step blocks (%s; next to each other in time); block means, "
             "90%% interval resampling runs then groups; [block medians]"
             % (len(runs), len(groups), every, ", ".join(states))]
    for label, statistic, pattern in specs(states):
        value = statistic(groups, "mean")
        interval = cluster_bootstrap(runs, lambda gs: statistic(gs, "mean"))
        median = statistic(groups, "median")
        lines.append("%-40s %s (%s) [%s]" % (
            label, "n/a" if value is None else pattern % value,
            "n/a" if not interval else (pattern + " .. " + pattern) % interval,
            "n/a" if median is None else pattern % median))
    return lines


def main(argv):
    if not argv:
        sys.exit("usage: toggle_report.py RESULT.json [RESULT.json ...]")
    runs, states, every = [], None, None
    for path in argv:
        try:
            with open(path) as f:
                result = json.load(f)
            run = block_groups(result)
            if states is not None and (set(run_states(result)) != set(states) or result["toggle_every"] != every):
                raise ValueError("its states or block size differ from the earlier runs'")
            states, every = run_states(result), result["toggle_every"]
            runs.append(run)
        except (OSError, ValueError, KeyError) as error:
            sys.exit("toggle_report.py: %s: %s" % (path, error))
    print("\n".join(report_lines(runs, states, every)))


if __name__ == "__main__":
    main(sys.argv[1:])
