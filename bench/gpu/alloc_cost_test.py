"""Unit tests of alloc_cost.py's report arithmetic, on hand-made run results (no GPU, no torch).

    python3 -m unittest alloc_cost_test      (from bench/gpu)
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import alloc_cost  # noqa: E402


def result(label, bursts, per_segment=3):
    """100 ms windows of one event per burst: a window of B bursts is 1e8 / B ns per event."""
    return {"label": label, "window_ms": 100, "events_per_burst": 1, "windows_per_segment": per_segment,
            "bursts_per_window": bursts}


class CompareTest(unittest.TestCase):
    def test_a_slower_cpu_set_cancels_out_over_the_latin_square(self):
        # Two CPU sets, B twice as slow as A; memtrace costs 1.5x no profiler. Segments of 3 windows, the first
        # of each (windows 0 and 3) left out whatever they hold.
        #   segment 0: none on A 6000 bursts (16,667 ns), memtrace on B 2000 (50,000 ns): ratio 3
        #   segment 1: none on B 3000 (33,333 ns),        memtrace on A 4000 (25,000 ns): ratio 0.75
        # exp((log 3 + log 0.75) / 2) = sqrt(2.25) = 1.5. No profiler's median over the counted windows:
        # (16,667, 16,667, 33,333, 33,333) -> 25,000 ns; memtrace's overhead 0.5 x 25,000 = 12,500 ns.
        c = alloc_cost.compare([result("none", [1, 6000, 6000, 7, 3000, 3000]),
                                result("memtrace", [9, 2000, 2000, 1, 4000, 4000])])
        self.assertEqual(c["segments"], 2)
        m = c["modes"]["memtrace"]
        self.assertAlmostEqual(m["ratio"], 1.5)
        self.assertAlmostEqual(m["overhead_ns"], 12500)
        self.assertAlmostEqual(m["event_ns"], 37500)
        self.assertAlmostEqual(c["modes"]["none"]["ratio"], 1.0)
        self.assertNotIn("overhead_fraction", c)  # no recorder among the modes

    def test_overhead_fraction_of_memtrace_against_the_recorder(self):
        # One segment of 3 windows, all CPUs alike: none 8000 bursts (12,500 ns), memtrace 6400 (15,625 ns:
        # 1.25x), python 4000 (25,000 ns: 2x). Fraction (1.25 - 1) / (2 - 1) = 0.25.
        c = alloc_cost.compare([result("none", [1, 8000, 8000]), result("memtrace", [1, 6400, 6400]),
                                result("python", [1, 4000, 4000])])
        self.assertAlmostEqual(c["modes"]["memtrace"]["ratio"], 1.25)
        self.assertAlmostEqual(c["modes"]["python"]["ratio"], 2.0)
        self.assertAlmostEqual(c["overhead_fraction"], 0.25)

    def test_windows_without_a_burst_and_incomplete_segments_are_left_out(self):
        # Segment 0: window 1 has no memtrace burst (left out), window 2 counts: ratio 8000 / 4000 = 2.
        # Segment 1: both windows empty for python -> the segment is left out. Windows 6-7: an incomplete
        # segment (3 windows make one), left out.
        c = alloc_cost.compare([result("none", [1, 8000, 8000, 1, 8000, 8000, 8000, 8000]),
                                result("memtrace", [1, 0, 4000, 1, 2000, 2000, 1, 1]),
                                result("python", [1, 10, 2000, 1, 0, 0, 1, 1])])
        self.assertEqual(c["segments"], 1)
        self.assertAlmostEqual(c["modes"]["memtrace"]["ratio"], 2.0)
        self.assertAlmostEqual(c["modes"]["python"]["ratio"], 4.0)
        self.assertAlmostEqual(c["overhead_fraction"], 1 / 3)

    def test_the_schedule_is_a_latin_square(self):
        # n = 3: slot 0 runs on sets 0, 1, 2; slot 1 on 1, 2, 0; slot 2 on 2, 0, 1. Every set holds one slot
        # in each segment, and every slot visits every set once.
        schedule = [[alloc_cost.cpu_set_index(slot, segment, 3) for segment in range(3)] for slot in range(3)]
        self.assertEqual(schedule, [[0, 1, 2], [1, 2, 0], [2, 0, 1]])

    def test_segment_spread_and_process_cpu_time_per_event(self):
        # Segment ratios of memtrace: 3 and 0.75 (test_a_slower_cpu_set_cancels_out_over_the_latin_square).
        # Process CPU: 0.9 s over the counted windows' bursts, 9 + 2000 + 2000 + 1 + 4000 + 4000 = 12010
        # events (one per burst) -> 0.9e9 / 12010 = 74937.55 ns.
        memtrace = result("memtrace", [9, 2000, 2000, 1, 4000, 4000])
        memtrace["process_cpu_s"] = 0.9
        c = alloc_cost.compare([result("none", [1, 6000, 6000, 7, 3000, 3000]), memtrace])
        m = c["modes"]["memtrace"]
        self.assertEqual(len(m["segment_ratios"]), 2)
        self.assertAlmostEqual(m["segment_ratios"][0], 3.0)
        self.assertAlmostEqual(m["segment_ratios"][1], 0.75)
        self.assertAlmostEqual(m["process_cpu_ns_per_event"], 0.9e9 / 12010)
        self.assertNotIn("process_cpu_ns_per_event", c["modes"]["none"])
        self.assertEqual(c["segments_run"], 2)

    def test_report_prints_every_mode_and_refuses_what_is_not_a_result(self):
        with tempfile.TemporaryDirectory() as d:
            paths = {}
            for label, bursts in (("none", [1, 8000, 8000]), ("memtrace", [1, 6400, 6400]),
                                  ("python", [1, 4000, 4000]), ("memtrace_nostacks", [1, 7000, 7000])):
                paths[label] = os.path.join(d, label + ".json")
                with open(paths[label], "w") as f:
                    json.dump(result(label, bursts), f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                alloc_cost.report(["%s=%s" % (k, v) for k, v in paths.items()])
            text = out.getvalue()
            # no stacks: 1e8 / 7000 = 14,286 ns per event, 8000 / 7000 = 1.143x.
            self.assertIn("memtrace, no stacks", text)
            self.assertIn("14286", text)
            self.assertIn("1.143x", text)
            self.assertIn("memtrace's overhead per event / stacks=\"python\"'s: 0.250", text)
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write("{\"window_ms\": 100}")
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stdout(io.StringIO()):
                alloc_cost.report(["none=" + paths["none"], "python=" + bad])
            self.assertIn("bad.json: not a run result", str(e.exception))
            with self.assertRaises(SystemExit) as e:
                alloc_cost.report(["memtrace=" + paths["memtrace"], "none=" + paths["none"]])
            self.assertIn("give none=NONE.json", str(e.exception))
            # Results of different runs (another window) are refused; a run with no comparable segment exits.
            other = os.path.join(d, "other.json")
            with open(other, "w") as f:
                json.dump(dict(result("x", [1, 1, 1]), window_ms=50), f)
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stdout(io.StringIO()):
                alloc_cost.report(["none=" + paths["none"], "memtrace=" + other])
            self.assertIn("differ in window_ms", str(e.exception))
            empty = os.path.join(d, "empty.json")
            with open(empty, "w") as f:
                json.dump(result("x", [1, 0, 0]), f)
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stdout(io.StringIO()):
                alloc_cost.report(["none=" + paths["none"], "memtrace=" + empty])
            self.assertIn("no segment in which every process completed a burst", str(e.exception))

    def test_report_warns_of_an_incomplete_square(self):
        # As test_windows_without_a_burst_and_incomplete_segments_are_left_out: 1 of 2 segments counted.
        with tempfile.TemporaryDirectory() as d:
            specs = []
            for label, bursts in (("none", [1, 8000, 8000, 1, 8000, 8000]), ("memtrace", [1, 0, 4000, 1, 2000, 2000]),
                                  ("python", [1, 10, 2000, 1, 0, 0])):
                path = os.path.join(d, label + ".json")
                with open(path, "w") as f:
                    json.dump(result(label, bursts), f)
                specs.append("%s=%s" % (label, path))
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                alloc_cost.report(specs)
            self.assertIn("1 of 2 segments of 3 windows", out.getvalue())
            self.assertIn("WARNING: 1 of 2 segments had a window without a burst", out.getvalue())


if __name__ == "__main__":
    unittest.main()
