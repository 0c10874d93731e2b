"""Unit tests of toggle_report.py and gpt_bench.py's toggle states on hand-made --toggle-every results (no GPU,
no torch).

    python3 -m unittest bench/gpu/toggle_report_test.py      (from the repository root)
"""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_bench  # noqa: E402
import toggle_report  # noqa: E402


def result(every, step_ms, cpu_ms, states=("memtrace", "off")):
    """A run whose blocks follow gpt_bench.py's own order (block_state)."""
    state = [gpt_bench.block_state(i // every, list(states)) for i in range(len(step_ms))]
    return {"toggle_every": every, "toggle_states": list(states), "step_state": state, "step_ms": step_ms,
            "issue_cpu_ms": cpu_ms}


def same(step_ms, cpu_ms):
    """A block's figures when its mean and median agree."""
    return {"mean": (step_ms, cpu_ms), "median": (step_ms, cpu_ms)}


class BlockOrderTest(unittest.TestCase):
    def test_two_states_alternate_which_comes_first(self):
        self.assertEqual([gpt_bench.block_state(b, ["memtrace", "off"]) for b in range(8)],
                         ["memtrace", "off", "off", "memtrace", "memtrace", "off", "off", "memtrace"])

    def test_three_states_run_through_all_six_orders(self):
        order = [gpt_bench.block_state(b, ["memtrace", "off", "recorder"]) for b in range(21)]
        self.assertEqual(order[:18], ["memtrace", "off", "recorder", "memtrace", "recorder", "off",
                                      "off", "memtrace", "recorder", "off", "recorder", "memtrace",
                                      "recorder", "memtrace", "off", "recorder", "off", "memtrace"])
        self.assertEqual(order[18:], order[:3])  # then again from the first order

    def test_state_names(self):
        self.assertIsNone(gpt_bench.toggle_states_problem(["memtrace", "off", "recorder", "memtrace32"]))
        self.assertIn("unknown state", gpt_bench.toggle_states_problem(["memtrace", "off", "memtracex"]))
        self.assertIn("off among them", gpt_bench.toggle_states_problem(["memtrace", "recorder"]))
        self.assertIn("at most once", gpt_bench.toggle_states_problem(["off", "memtrace", "off"]))
        self.assertEqual([gpt_bench.frames_of(s) for s in ("memtrace32", "memtrace", "memtrace0", "off", "recorder")],
                         [32, -1, 0, -1, -1])


class ToggleReportTest(unittest.TestCase):
    def test_groups_take_each_block_s_mean_and_median(self):
        # Blocks of 3: block 0 (memtrace) steps 10, 12, 11: mean and median 11; block 1 (off) 10, 9, 11: 10, 10;
        # block 2 (off) 20, 20, 23: mean 21, median 20; block 3 (memtrace) 22, 25, 22: mean 23, median 22;
        # block 4 alone, left out. CPU: 5 / 4, then block 2 8, 7, 9 (mean and median 8), block 3 6, 7, 8 (7).
        steps = [10, 12, 11, 10, 9, 11, 20, 20, 23, 22, 25, 22, 30, 30, 30]
        cpu = [5, 5, 5, 4, 4, 4, 8, 7, 9, 6, 7, 8, 1, 1, 1]
        groups = toggle_report.block_groups(result(3, steps, cpu))
        self.assertEqual(groups, [{"memtrace": same(11, 5), "off": same(10, 4)},
                                  {"off": {"mean": (21, 8), "median": (20, 8)},
                                   "memtrace": {"mean": (23, 7), "median": (22, 7)}}])
        # Means: ratios 11/10 and 23/21, geometric mean sqrt(1.1 * 23/21); medians 1.1 and 1.1.
        self.assertAlmostEqual(toggle_report.step_ratio(groups, "memtrace"), math.sqrt(1.1 * 23 / 21))
        self.assertAlmostEqual(toggle_report.step_ratio(groups, "memtrace", "median"), 1.1)
        # CPU differences 1 and -1: mean 0.
        self.assertAlmostEqual(toggle_report.cpu_difference(groups, "memtrace"), 0.0)

    def test_three_states_and_the_cpu_fraction(self):
        # Blocks of 1, orders (memtrace, off, recorder) then (memtrace, recorder, off).
        # Group 1: step 11 / 10 / 12, CPU 6 / 5 / 9; group 2: step 22 / 24 / 20, CPU 8 / 10 / 7.
        steps = [11, 10, 12, 22, 24, 20, 99]
        cpu = [6, 5, 9, 8, 10, 7, 99]
        groups = toggle_report.block_groups(result(1, steps, cpu, ("memtrace", "off", "recorder")))
        self.assertEqual(groups, [{"memtrace": same(11, 6), "off": same(10, 5), "recorder": same(12, 9)},
                                  {"memtrace": same(22, 8), "recorder": same(24, 10), "off": same(20, 7)}])
        # memtrace/off 1.1 and 1.1; recorder/off 1.2 and 1.2.
        self.assertAlmostEqual(toggle_report.step_ratio(groups, "memtrace"), 1.1)
        self.assertAlmostEqual(toggle_report.step_ratio(groups, "recorder"), 1.2)
        # CPU memtrace-off 1 and 1 (mean 1); recorder-off 4 and 3 (mean 3.5); fraction (1+1)/(4+3) = 2/7.
        self.assertAlmostEqual(toggle_report.cpu_difference(groups, "memtrace"), 1.0)
        self.assertAlmostEqual(toggle_report.cpu_difference(groups, "recorder"), 3.5)
        self.assertAlmostEqual(toggle_report.cpu_fraction(groups, "memtrace"), 2 / 7)

    def test_the_fraction_is_undefined_when_the_recorder_costs_nothing(self):
        group = {"memtrace": same(1, 6), "off": same(1, 5), "recorder": same(1, 5)}
        self.assertIsNone(toggle_report.cpu_fraction([group], "memtrace"))

    def test_the_bootstrap_draws_runs_then_groups(self):
        # Two runs of one group each, the statistic their mean: both draws of the first run (1/4) give 1.0, of the
        # second (1/4) 2.0, one of each (1/2) 1.5: 5th percentile 1.0, 95th 2.0.
        mean = lambda groups: sum(groups) / len(groups)  # noqa: E731
        self.assertEqual(toggle_report.cluster_bootstrap([[1.0], [2.0]], mean), (1.0, 2.0))
        # One run: only its groups are drawn. Two groups 1.0 and 2.0 give the same distribution as above.
        self.assertEqual(toggle_report.cluster_bootstrap([[1.0, 2.0]], mean), (1.0, 2.0))
        # One run of one group: nothing to resample.
        self.assertIsNone(toggle_report.cluster_bootstrap([[1.0]], mean))

    def test_report_lines(self):
        # Runs of one group each: memtrace 12 / off 10 (CPU 6 / 4) and 10 / 10 (5 / 5). Ratio: geometric mean
        # sqrt(1.2); resampled as in the test above, 1.0 .. 1.2. CPU: +1.00, 0.00 .. 2.00. Medians as means.
        runs = [[{"memtrace": same(12, 6), "off": same(10, 4)}], [{"memtrace": same(10, 5), "off": same(10, 5)}]]
        lines = toggle_report.report_lines(runs, ["memtrace", "off"], 5)
        ratio = "%.4fx" % math.sqrt(1.2)
        self.assertEqual(lines, [
            "toggle: 2 runs, 2 groups of 5-step blocks (memtrace, off; next to each other in time); block means, "
            "90% interval resampling runs then groups; [block medians]",
            "step time memtrace/off                   %s (1.0000x .. 1.2000x) [%s]" % (ratio, ratio),
            "CPU per step memtrace-off                +1.00 ms (+0.00 ms .. +2.00 ms) [+1.00 ms]"])

    def test_report_lines_name_every_state_and_each_tracer_state_s_fraction(self):
        group = {"memtrace": same(11, 6), "off": same(10, 5), "memtrace32": same(12, 7), "recorder": same(13, 9)}
        lines = toggle_report.report_lines([[group]], ["memtrace", "off", "memtrace32", "recorder"], 5)
        # One group: no interval. Fractions: (6-5)/(9-5) = 0.25, (7-5)/(9-5) = 0.5.
        self.assertEqual([line.split()[:3] for line in lines[1:]],
                         [["step", "time", "memtrace/off"], ["CPU", "per", "step"],
                          ["step", "time", "memtrace32/off"], ["CPU", "per", "step"],
                          ["step", "time", "recorder/off"], ["CPU", "per", "step"],
                          ["CPU", "(memtrace-off)/(recorder-off)", "0.250"],
                          ["CPU", "(memtrace32-off)/(recorder-off)", "0.500"]])

    def test_first_version_runs_name_their_states_by_toggle_peer(self):
        self.assertEqual(toggle_report.run_states({"toggle_peer": "python"}), ["memtrace", "off", "recorder"])
        self.assertEqual(toggle_report.run_states({"toggle_peer": "none"}), ["memtrace", "off"])

    def test_a_run_without_toggling_is_refused(self):
        with self.assertRaises(ValueError):
            toggle_report.block_groups({"toggle_every": 0, "toggle_states": ["memtrace", "off"], "step_state": None,
                                        "step_ms": [1], "issue_cpu_ms": [1]})

    def test_a_block_that_mixes_states_is_refused(self):
        bad = result(2, [1, 1, 1, 1], [1, 1, 1, 1])
        bad["step_state"][1] = "off"
        with self.assertRaises(ValueError):
            toggle_report.block_groups(bad)

    def test_a_group_without_each_state_once_is_refused(self):
        bad = result(1, [1, 1, 1, 1], [1, 1, 1, 1])
        bad["step_state"] = ["memtrace", "memtrace", "off", "off"]
        with self.assertRaises(ValueError):
            toggle_report.block_groups(bad)
        # A three-state run whose first group lacks a state is refused, not read as a two-state run.
        short = result(1, [1, 1, 1], [1, 1, 1], ("memtrace", "off", "recorder"))
        short["step_state"] = ["memtrace", "off", "off"]
        with self.assertRaises(ValueError):
            toggle_report.block_groups(short)


if __name__ == "__main__":
    unittest.main()
