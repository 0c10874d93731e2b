"""Unit tests of gpu_bench_report.py's arithmetic, on hand-made runs (no GPU, no torch).

    python3 -m unittest tests/gpu/gpu_bench_report_test.py      (from the repository root)
"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_bench_report as report  # noqa: E402


def write_runs(work, runs, measures):
    """runs: {(round, mode): RUN.json dict}; measures: [(round, mode, key, value)]."""
    for (round_, mode), run in runs.items():
        with open(os.path.join(work, "%s-%s.json" % (round_, mode)), "w") as f:
            json.dump(run, f)
    with open(os.path.join(work, "measures.tsv"), "w") as f:
        for row in measures:
            f.write("\t".join(str(v) for v in row) + "\n")


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.work = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def figures(self):
        return report.mode_figures(report.load_runs(self.work))

    def test_steps_of_all_rounds_are_pooled_before_the_median(self):
        # Round 1: 10, 11, 12; round 2: 20, 21. Pooled: 10 11 12 20 21 -> median 12 (not the median of the
        # round medians, (11 + 20.5) / 2 = 15.75).
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [10, 11, 12], "median_step_ms": 11},
            ("2", "none"): {"step_ms": [20, 21], "median_step_ms": 20.5},
        }, [])
        f = self.figures()["none"]
        self.assertEqual(f["median_step_ms"], 12)
        self.assertEqual(f["steps"], 5)
        self.assertEqual(f["runs"], 2)
        self.assertEqual(f["round_medians_ms"], [11, 20.5])

    def test_lower_quartile_and_issue_cpu_time_are_pooled_over_rounds(self):
        # Steps pooled: 10 11 12 13 20 21 22 23 30 (9 values); the 0.25-quantile without interpolation is the
        # value at index int(0.25 * 8) = 2: 12. Issue CPU pooled: 1 2 3 4 5 (5 values): median at index 2: 3.
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [10, 20, 30, 11, 21], "issue_cpu_ms": [1, 5, 3]},
            ("2", "none"): {"step_ms": [12, 22, 13, 23], "issue_cpu_ms": [2, 4]},
        }, [])
        f = self.figures()["none"]
        self.assertEqual(f["p25_step_ms"], 12)
        self.assertEqual(f["median_issue_cpu_ms"], 3)
        self.assertIsNone(f["median_issue_ms"])

    def test_an_ablation_mode_is_read_and_compared_with_no_profiler(self):
        # memtrace_nostacks 42 against none 40: 1.050x; p25 of one step is that step.
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [40], "issue_cpu_ms": [20]},
            ("1", "memtrace_nostacks"): {"step_ms": [42], "issue_cpu_ms": [25]},
        }, [])
        lines = report.ablation_lines(self.figures())
        self.assertEqual(len(lines), 1)
        self.assertIn("median 42.00 ms 1.050x of a; p25 42.00 ms 1.050x; issue CPU 25.00 ms 1.250x", lines[0])

    def test_overhead_fraction_and_ratios(self):
        # a 40, b 41, c 44: (41 - 40) / (44 - 40) = 0.25; b/a = 41/40 = 1.025; e/f = 33/30 = 1.1.
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [40]},
            ("1", "memtrace"): {"step_ms": [41]},
            ("1", "history_python"): {"step_ms": [44]},
            ("1", "memtrace_async"): {"step_ms": [33]},
            ("1", "none_async"): {"step_ms": [30]},
        }, [])
        f = self.figures()
        self.assertEqual(report.overhead_fraction(f), 0.25)
        self.assertEqual(report.ratio(f["memtrace"]["median_step_ms"], f["none"]["median_step_ms"]), 1.025)
        self.assertEqual(report.ratio(f["memtrace_async"]["median_step_ms"], f["none_async"]["median_step_ms"]), 1.1)

    def test_no_overhead_fraction_when_the_recorder_costs_nothing(self):
        # c <= a: the fraction would divide by zero or flip sign, so it is not given.
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [40]},
            ("1", "memtrace"): {"step_ms": [41]},
            ("1", "history_python"): {"step_ms": [40]},
        }, [])
        self.assertIsNone(report.overhead_fraction(self.figures()))

    def test_trace_and_snapshot_sizes_per_event(self):
        # Trace: 300,000 B for 120,000 events = 2.5 B/event (median of rounds 290,000 and 310,000 = 300,000).
        # Snapshot: 9,200,000 B for 100,000 entries = 92 B/entry; report time 0.5 + 3.0 = 3.5 s.
        write_runs(self.work, {
            ("1", "memtrace"): {"step_ms": [41]},
            ("2", "memtrace"): {"step_ms": [41]},
            ("1", "history_python"): {"step_ms": [44], "snapshot_bytes": 9200000, "snapshot_entries": 100000,
                                      "dump_snapshot_s": 0.5},
        }, [
            (1, "memtrace", "trace_bytes", 290000), (1, "memtrace", "trace_events", 120000),
            (2, "memtrace", "trace_bytes", 310000), (2, "memtrace", "trace_events", 120000),
            (1, "memtrace", "summary_s", 0.75), (1, "history_python", "memviz_stats_s", 3.0),
        ])
        f = self.figures()
        self.assertEqual(report.record_figures(f["memtrace"]), (300000, 120000, 2.5))
        self.assertEqual(report.record_figures(f["history_python"]), (9200000, 100000, 92.0))
        self.assertEqual(report.report_time_s(f["memtrace"]), 0.75)
        self.assertEqual(report.report_time_s(f["history_python"]), 3.5)

    def test_a_failed_mode_shows_as_failed_and_a_bad_measure_line_is_left_out(self):
        write_runs(self.work, {("1", "none"): {"step_ms": [40]}}, [(1, "memtrace", "exit_status", 1)])
        with open(os.path.join(self.work, "measures.tsv"), "a") as f:
            f.write("1\tmemtrace\ttrace_events\tnot-a-number\n")
        f = self.figures()
        self.assertIsNone(f["memtrace"]["median_step_ms"])
        self.assertIsNone(f["memtrace"]["trace_events"])
        row = [line for line in report.plain_table(f) if line.startswith("b ")][0]
        self.assertIn("failed", row)


    def test_round_bootstrap_of_the_overhead_fraction(self):
        # Round 1: a 10, b 11, c 14 -> (11 - 10) / (14 - 10) = 0.25. Round 2: a 10, b 12, c 14 -> 0.5. A draw
        # of two rounds picks {1, 1} (0.25), {2, 2} (0.5) or one of each (pooled b 11, 12: median 11.5 ->
        # 0.375), with chances 1/4, 1/4, 1/2: the 5th percentile of 2000 draws is 0.25, the 95th 0.5.
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [10]}, ("1", "memtrace"): {"step_ms": [11]},
            ("1", "history_python"): {"step_ms": [14]},
            ("2", "none"): {"step_ms": [10]}, ("2", "memtrace"): {"step_ms": [12]},
            ("2", "history_python"): {"step_ms": [14]},
        }, [])
        runs = report.load_runs(self.work)
        self.assertEqual(report.round_bootstrap(runs, report.pooled_overhead_fraction), (0.25, 0.5))
        # b/a: 1.1, 1.2 or pooled 1.15; the same chances.
        low, high = report.round_bootstrap(runs, report.pooled_ratio("memtrace", "none"))
        self.assertAlmostEqual(low, 1.1)
        self.assertAlmostEqual(high, 1.2)

    def test_round_bootstrap_needs_two_rounds_and_a_recorder_slower_than_none(self):
        write_runs(self.work, {("1", "none"): {"step_ms": [10]}, ("1", "memtrace"): {"step_ms": [11]},
                               ("1", "history_python"): {"step_ms": [14]}}, [])
        self.assertIsNone(report.round_bootstrap(report.load_runs(self.work), report.pooled_overhead_fraction))
        # Two rounds where c is never slower than a: (b-a)/(c-a) has no value in any draw.
        write_runs(self.work, {("2", "none"): {"step_ms": [10]}, ("2", "memtrace"): {"step_ms": [11]},
                               ("2", "history_python"): {"step_ms": [9]},
                               ("1", "history_python"): {"step_ms": [10]}}, [])
        self.assertIsNone(report.round_bootstrap(report.load_runs(self.work), report.pooled_overhead_fraction))


if __name__ == "__main__":
    unittest.main()
