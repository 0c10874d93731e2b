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


def result(every, step_ms, cpu_ms):
    """A run whose blocks follow gpt_bench.py's own order (block_records: on, off, off, on, on, off, ...)."""
    recording = [gpt_bench.block_records(i // every) for i in range(len(step_ms))]
    return {"toggle_every": every, "step_recording": recording, "step_ms": step_ms, "issue_cpu_ms": cpu_ms}


class ToggleReportTest(unittest.TestCase):
    def test_gpt_bench_s_block_order(self):
        self.assertEqual([gpt_bench.block_records(b) for b in range(8)],
                         [True, False, False, True, True, False, False, True])

    def test_pairs_take_each_block_s_median_and_put_on_first(self):
        # Blocks of 3: block 0 (on) steps 10, 12, 11 -> 11; block 1 (off) 10, 9, 10 -> 10; block 2 (off) 20, 20,
        # 21 -> 20; block 3 (on) 22, 24, 22 -> 22; block 4 (on) alone, left out. CPU: 5 / 4, 8 / 7.
        steps = [10, 12, 11, 10, 9, 10, 20, 20, 21, 22, 24, 22, 30, 30, 30]
        cpu = [5, 5, 5, 4, 4, 4, 8, 7, 7, 6, 7, 7, 1, 1, 1]
        pairs = toggle_report.block_pairs(result(3, steps, cpu))
        self.assertEqual(pairs, [(11, 10, 5, 4), (22, 20, 7, 7)])
        # Ratios 1.1 and 1.1: geometric mean 1.1; CPU differences 1 and 0: mean 0.5.
        self.assertAlmostEqual(toggle_report.step_ratio(pairs), 1.1)
        self.assertAlmostEqual(toggle_report.cpu_difference(pairs), 0.5)

    def test_report_lines_with_intervals(self):
        # Pairs (on, off): 12/10 = 1.2 and 10/10 = 1.0: geometric mean sqrt(1.2) = 1.0954; CPU 2 and 0: +1.00.
        # Two pairs resampled: both 1.2 (1/4), both 1.0 (1/4), one of each (1/2): 5th percentile 1.0, 95th 1.2.
        pairs = [(12, 10, 6, 4), (10, 10, 5, 5)]
        lines = toggle_report.report_lines(pairs, 5)
        self.assertEqual(lines[0], "toggle: 2 pairs of 5-step blocks (recording on / off, next to each other in time)")
        self.assertEqual(lines[1], "step time on/off     %.4fx; 90%% interval, pairs resampled: 1.0000x .. 1.2000x"
                         % math.sqrt(1.2))
        self.assertEqual(lines[2], "CPU per step on-off  +1.00 ms; 90% interval, pairs resampled: +0.00 ms .. +2.00 ms")

    def test_a_run_without_toggling_is_refused(self):
        with self.assertRaises(ValueError):
            toggle_report.block_pairs({"toggle_every": 0, "step_recording": None, "step_ms": [1], "issue_cpu_ms": [1]})

    def test_a_block_that_mixes_states_is_refused(self):
        bad = result(2, [1, 1, 1, 1], [1, 1, 1, 1])
        bad["step_recording"][1] = False
        with self.assertRaises(ValueError):
            toggle_report.block_pairs(bad)


if __name__ == "__main__":
    unittest.main()
