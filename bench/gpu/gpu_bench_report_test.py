"""Unit tests of gpu_bench_report.py's arithmetic, on hand-made runs (no GPU, no torch).

    python3 -m unittest bench/gpu/gpu_bench_report_test.py      (from the repository root)
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

    def test_an_ablation_mode_s_cpu_time_paired_by_round(self):
        # memtrace_alt's CPU per step minus none's: round 1 25 - 20 = 5, round 2 33 - 30 = 3: mean 4.00.
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [40], "issue_cpu_ms": [20]},
            ("1", "memtrace_alt"): {"step_ms": [42], "issue_cpu_ms": [25]},
            ("2", "none"): {"step_ms": [40], "issue_cpu_ms": [30]},
            ("2", "memtrace_alt"): {"step_ms": [41], "issue_cpu_ms": [33]},
        }, [])
        runs = report.load_runs(self.work)
        lines = report.ablation_lines(report.mode_figures(runs), runs)
        self.assertEqual(len(lines), 1)
        self.assertIn("memtrace of another build", lines[0])
        self.assertIn("paired +4.00 ms/step over 2 rounds", lines[0])

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


    def test_ratios_paired_by_round(self):
        # Round 1: a 10, b 11, c 14 (b/a 1.1, c/a 1.4); round 2: a 20, b 24, c 30 (1.2, 1.5); round 3 has no c.
        # b/a over rounds 1-3 (b 12 / a 10 in round 3: 1.2): (1.1 * 1.2 * 1.2) ** (1/3) = 1.16570...
        # c/a over rounds 1-2: sqrt(1.4 * 1.5) = 1.44914...; the fraction over rounds 1-2:
        # b/a there sqrt(1.1 * 1.2) = 1.14891..., (0.14891) / (0.44914) = 0.33155...
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [10, 9, 11]}, ("1", "memtrace"): {"step_ms": [11]},
            ("1", "history_python"): {"step_ms": [14]},
            ("2", "none"): {"step_ms": [20]}, ("2", "memtrace"): {"step_ms": [24]},
            ("2", "history_python"): {"step_ms": [30]},
            ("3", "none"): {"step_ms": [10]}, ("3", "memtrace"): {"step_ms": [12]},
        }, [])
        medians = report.round_medians(report.load_runs(self.work))
        self.assertEqual(report.common_rounds(medians, ("memtrace", "none")), ["1", "2", "3"])
        abc = report.common_rounds(medians, ("none", "memtrace", "history_python"))
        self.assertEqual(abc, ["1", "2"])
        self.assertAlmostEqual(report.paired_ratio(medians, "memtrace", "none", ["1", "2", "3"]),
                               (1.1 * 1.2 * 1.2) ** (1 / 3))
        self.assertAlmostEqual(report.paired_fraction(medians, abc),
                               ((1.1 * 1.2) ** 0.5 - 1) / ((1.4 * 1.5) ** 0.5 - 1))
        # Two rounds resampled: {1, 1} -> 1.1, {2, 2} -> 1.2, one of each -> sqrt(1.32); chances 1/4, 1/4,
        # 1/2: the 5th percentile of 2000 draws is 1.1, the 95th 1.2.
        low, high = report.round_bootstrap(abc, lambda rs: report.paired_ratio(medians, "memtrace", "none", rs))
        self.assertAlmostEqual(low, 1.1)
        self.assertAlmostEqual(high, 1.2)
        lines = report.paired_lines(report.load_runs(self.work))
        self.assertTrue(lines[0].startswith("b/a             paired by round: 1.166x over 3 rounds"))
        self.assertIn("(b-a)/(c-a)     paired by round: 0.332 over 2 rounds", "\n".join(lines))
        self.assertNotIn("CPU", "\n".join(lines[:-1]))  # no run has issue_cpu_ms

    def test_cpu_time_paired_by_round(self):
        # CPU ms per step while issuing. Round 1: a median of [30, 34, 31] = 31, b 33, c 40 (b-a 2, c-a 9);
        # round 2: a 35, b 36, c 47 (1, 12); round 3: a 30, b 33, no c (3).
        # b-a over rounds 1-3: (2 + 1 + 3) / 3 = 2.00; c-a over rounds 1-2: (9 + 12) / 2 = 10.50;
        # the fraction over rounds 1-2: ((2 + 1) / 2) / 10.5 = 1.5 / 10.5 = 0.142857...
        write_runs(self.work, {
            ("1", "none"): {"step_ms": [50], "issue_cpu_ms": [30, 34, 31]},
            ("1", "memtrace"): {"step_ms": [50], "issue_cpu_ms": [33]},
            ("1", "history_python"): {"step_ms": [55], "issue_cpu_ms": [40]},
            ("2", "none"): {"step_ms": [50], "issue_cpu_ms": [35]},
            ("2", "memtrace"): {"step_ms": [51], "issue_cpu_ms": [36]},
            ("2", "history_python"): {"step_ms": [54], "issue_cpu_ms": [47]},
            ("3", "none"): {"step_ms": [50], "issue_cpu_ms": [30]},
            ("3", "memtrace"): {"step_ms": [50], "issue_cpu_ms": [33]},
        }, [])
        cpu = report.round_medians(report.load_runs(self.work), "issue_cpu_ms")
        self.assertEqual(cpu["none"], {"1": 31, "2": 35, "3": 30})
        self.assertAlmostEqual(report.paired_difference(cpu, "memtrace", "none", ["1", "2", "3"]), 2.0)
        self.assertAlmostEqual(report.paired_cpu_fraction(cpu, ["1", "2"]), 1.5 / 10.5)
        text = "\n".join(report.paired_lines(report.load_runs(self.work)))
        self.assertIn("CPU b-a         paired by round: +2.00 ms/step over 3 rounds", text)
        self.assertIn("CPU c-a         paired by round: +10.50 ms/step over 2 rounds", text)
        self.assertIn("CPU (b-a)/(c-a) paired by round: 0.143 over 2 rounds", text)

    def test_no_cpu_fraction_when_the_recorder_costs_no_cpu(self):
        write_runs(self.work, {("1", "none"): {"issue_cpu_ms": [30]}, ("1", "memtrace"): {"issue_cpu_ms": [31]},
                               ("1", "history_python"): {"issue_cpu_ms": [30]}}, [])
        cpu = report.round_medians(report.load_runs(self.work), "issue_cpu_ms")
        self.assertIsNone(report.paired_cpu_fraction(cpu, ["1"]))

    def test_no_interval_from_one_round_and_no_fraction_when_the_recorder_is_not_slower(self):
        write_runs(self.work, {("1", "none"): {"step_ms": [10]}, ("1", "memtrace"): {"step_ms": [11]},
                               ("1", "history_python"): {"step_ms": [9]}}, [])
        medians = report.round_medians(report.load_runs(self.work))
        self.assertIsNone(report.round_bootstrap(["1"], lambda rs: report.paired_ratio(medians, "memtrace", "none", rs)))
        self.assertIsNone(report.paired_fraction(medians, ["1"]))


if __name__ == "__main__":
    unittest.main()
