"""Unit tests of toggle_report.py on hand-made gpt_bench.py --toggle-every results (no GPU, no torch).

    python3 -m unittest tests/gpu/toggle_report_test.py      (from the repository root)
"""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_bench  # noqa: E402
import toggle_report  # noqa: E402


def result(every, step_ms, cpu_ms, peer="none"):
    """A run whose blocks follow gpt_bench.py's own order (block_state)."""
    states = gpt_bench.toggle_states(peer)
    state = [gpt_bench.block_state(i // every, states) for i in range(len(step_ms))]
    return {"toggle_every": every, "step_state": state, "step_ms": step_ms, "issue_cpu_ms": cpu_ms}


class BlockOrderTest(unittest.TestCase):
    def test_two_states_alternate_which_comes_first(self):
        states = gpt_bench.toggle_states("none")
        self.assertEqual([gpt_bench.block_state(b, states) for b in range(8)],
                         ["memtrace", "off", "off", "memtrace", "memtrace", "off", "off", "memtrace"])

    def test_three_states_run_through_all_six_orders(self):
        states = gpt_bench.toggle_states("python")
        order = [gpt_bench.block_state(b, states) for b in range(21)]
        self.assertEqual(order[:18], ["memtrace", "off", "recorder", "memtrace", "recorder", "off",
                                      "off", "memtrace", "recorder", "off", "recorder", "memtrace",
                                      "recorder", "memtrace", "off", "recorder", "off", "memtrace"])
        self.assertEqual(order[18:], order[:3])  # then again from the first order


class ToggleReportTest(unittest.TestCase):
    def test_groups_take_each_block_s_median(self):
        # Blocks of 3: block 0 (memtrace) steps 10, 12, 11 -> 11; block 1 (off) 10, 9, 10 -> 10; block 2 (off)
        # 20, 20, 21 -> 20; block 3 (memtrace) 22, 24, 22 -> 22; block 4 alone, left out. CPU: 5 / 4, 7 / 7.
        steps = [10, 12, 11, 10, 9, 10, 20, 20, 21, 22, 24, 22, 30, 30, 30]
        cpu = [5, 5, 5, 4, 4, 4, 8, 7, 7, 6, 7, 7, 1, 1, 1]
        groups = toggle_report.block_groups(result(3, steps, cpu))
        self.assertEqual(groups, [{"memtrace": (11, 5), "off": (10, 4)}, {"off": (20, 7), "memtrace": (22, 7)}])
        # Ratios 1.1 and 1.1: geometric mean 1.1; CPU differences 1 and 0: mean 0.5.
        self.assertAlmostEqual(toggle_report.step_ratio(groups, "memtrace"), 1.1)
        self.assertAlmostEqual(toggle_report.cpu_difference(groups, "memtrace"), 0.5)

    def test_three_states_and_the_cpu_fraction(self):
        # Blocks of 1, orders (memtrace, off, recorder) then (memtrace, recorder, off).
        # Group 1: step 11 / 10 / 12, CPU 6 / 5 / 9; group 2: step 22 / 24 / 20, CPU 8 / 10 / 7.
        steps = [11, 10, 12, 22, 24, 20, 99]
        cpu = [6, 5, 9, 8, 10, 7, 99]
        groups = toggle_report.block_groups(result(1, steps, cpu, peer="python"))
        self.assertEqual(groups, [{"memtrace": (11, 6), "off": (10, 5), "recorder": (12, 9)},
                                  {"memtrace": (22, 8), "recorder": (24, 10), "off": (20, 7)}])
        # memtrace/off 1.1 and 1.1; recorder/off 1.2 and 1.2.
        self.assertAlmostEqual(toggle_report.step_ratio(groups, "memtrace"), 1.1)
        self.assertAlmostEqual(toggle_report.step_ratio(groups, "recorder"), 1.2)
        # CPU memtrace-off 1 and 1 (mean 1); recorder-off 4 and 3 (mean 3.5); fraction (1+1)/(4+3) = 2/7.
        self.assertAlmostEqual(toggle_report.cpu_difference(groups, "memtrace"), 1.0)
        self.assertAlmostEqual(toggle_report.cpu_difference(groups, "recorder"), 3.5)
        self.assertAlmostEqual(toggle_report.cpu_fraction(groups), 2 / 7)

    def test_the_fraction_is_undefined_when_the_recorder_costs_nothing(self):
        self.assertIsNone(toggle_report.cpu_fraction([{"memtrace": (1, 6), "off": (1, 5), "recorder": (1, 5)}]))

    def test_report_lines_with_intervals(self):
        # Groups (memtrace, off): 12/10 = 1.2 and 10/10 = 1.0: geometric mean sqrt(1.2) = 1.0954; CPU 2 and 0:
        # +1.00. Two groups resampled: both 1.2 (1/4), both 1.0 (1/4), one of each (1/2): 5th percentile 1.0,
        # 95th 1.2.
        groups = [{"memtrace": (12, 6), "off": (10, 4)}, {"memtrace": (10, 5), "off": (10, 5)}]
        lines = toggle_report.report_lines(groups, 5)
        self.assertEqual(lines, [
            "toggle: 2 groups of 5-step blocks (memtrace, off; next to each other in time)",
            "step time memtrace/off             %.4fx; 90%% interval, groups resampled: 1.0000x .. 1.2000x"
            % math.sqrt(1.2),
            "CPU per step memtrace-off          +1.00 ms; 90% interval, groups resampled: +0.00 ms .. +2.00 ms"])

    def test_report_lines_with_the_recorder(self):
        groups = [{"memtrace": (11, 6), "off": (10, 5), "recorder": (12, 9)},
                  {"memtrace": (22, 8), "recorder": (24, 10), "off": (20, 7)}]
        lines = toggle_report.report_lines(groups, 1)
        self.assertEqual(lines[0], "toggle: 2 groups of 1-step blocks (memtrace, off, recorder; next to each other "
                                   "in time)")
        self.assertEqual([line.split()[0:3] for line in lines[1:]],
                         [["step", "time", "memtrace/off"], ["CPU", "per", "step"], ["step", "time", "recorder/off"],
                          ["CPU", "per", "step"], ["CPU", "(memtrace-off)/(recorder-off)", "0.286;"]])

    def test_a_run_without_toggling_is_refused(self):
        with self.assertRaises(ValueError):
            toggle_report.block_groups({"toggle_every": 0, "step_state": None, "step_ms": [1], "issue_cpu_ms": [1]})

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


if __name__ == "__main__":
    unittest.main()
