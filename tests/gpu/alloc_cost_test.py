"""Unit tests of alloc_cost.py's report arithmetic, on hand-made run results (no GPU, no torch).

    python3 -m unittest alloc_cost_test      (from tests/gpu)
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


def result(label, bursts, window_ms=100, events_per_burst=8):
    return {"label": label, "window_ms": window_ms, "events_per_burst": events_per_burst,
            "bursts_per_window": bursts}


class CompareTest(unittest.TestCase):
    def test_windows_are_compared_side_by_side(self):
        # 100 ms windows, 8 events a burst: a window of B bursts is 1e8 ns / (8 B) per event.
        # Windows 0 and 1 are warm-up (left out whatever they hold). Windows 2, 3, 4:
        #   none      1250, 625, 1250 bursts -> 10000, 20000, 10000 ns/event
        #   memtrace  1000, 500, 1000        -> 12500, 25000, 12500   (overhead 2500, 5000, 2500)
        #   python     500, 250,  500        -> 25000, 50000, 25000   (overhead 15000, 30000, 15000)
        # The slow window 3 (everything at half speed) moves every mode alike: ratios 1.25 and 2.5 in each.
        c = alloc_cost.compare([result("none", [1, 1, 1250, 625, 1250]),
                                result("memtrace", [0, 1, 1000, 500, 1000]),
                                result("python", [1, 0, 500, 250, 500])])
        self.assertEqual(c["windows"], 3)
        self.assertEqual(c["modes"]["none"]["median_event_ns"], 10000)
        self.assertEqual(c["modes"]["memtrace"]["median_event_ns"], 12500)
        self.assertEqual(c["modes"]["memtrace"]["median_ratio"], 1.25)
        self.assertEqual(c["modes"]["python"]["median_ratio"], 2.5)
        self.assertEqual(c["modes"]["memtrace"]["median_overhead_ns"], 2500)
        self.assertEqual(c["modes"]["python"]["median_overhead_ns"], 15000)
        self.assertAlmostEqual(c["overhead_fraction"], 2500 / 15000)

    def test_a_window_without_a_burst_in_some_process_is_left_out(self):
        # Window 2: memtrace completed none -> left out; window 3 is the only one compared.
        c = alloc_cost.compare([result("none", [9, 9, 100, 100]), result("memtrace", [9, 9, 0, 50]),
                                result("python", [9, 9, 100, 25])])
        self.assertEqual(c["windows"], 1)
        self.assertEqual(c["modes"]["memtrace"]["median_ratio"], 2.0)
        self.assertEqual(c["modes"]["python"]["median_ratio"], 4.0)
        # Overheads per event: none 1e8 / 800 = 125000 ns; memtrace 250000 (+125000); python 500000 (+375000).
        self.assertAlmostEqual(c["overhead_fraction"], 125000 / 375000)

    def test_no_fraction_when_the_recorder_costs_nothing(self):
        c = alloc_cost.compare([result("none", [1, 1, 100]), result("memtrace", [1, 1, 50]),
                                result("python", [1, 1, 100])])
        self.assertNotIn("overhead_fraction", c)

    def test_report_refuses_a_file_that_is_not_a_result(self):
        with tempfile.TemporaryDirectory() as d:
            good = os.path.join(d, "good.json")
            bad = os.path.join(d, "bad.json")
            with open(good, "w") as f:
                json.dump(result("x", [1, 1, 1]), f)
            with open(bad, "w") as f:
                f.write("{\"window_ms\": 100}")
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stdout(io.StringIO()):
                alloc_cost.report(["none=" + good, "memtrace=" + good, "python=" + bad])
            self.assertIn("bad.json: not a run result", str(e.exception))
            with self.assertRaises(SystemExit) as e:
                alloc_cost.report(["memtrace=" + good, "none=" + good])
            self.assertIn("give none=NONE.json", str(e.exception))

    def test_report_prints_every_mode_and_the_fraction(self):
        with tempfile.TemporaryDirectory() as d:
            paths = {}
            # As in test_windows_are_compared_side_by_side, window 2 only, plus an ablation at 11250 ns/event
            # (1e8 / (8 * 1111.1)): 1111 bursts -> 1e8 / 8888 = 11251 ns.
            for label, bursts in (("none", [1, 1, 1250]), ("memtrace", [1, 1, 1000]), ("python", [1, 1, 500]),
                                  ("memtrace_nostacks", [1, 1, 1111])):
                paths[label] = os.path.join(d, label + ".json")
                with open(paths[label], "w") as f:
                    json.dump(result(label, bursts), f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                alloc_cost.report(["%s=%s" % (k, v) for k, v in paths.items()])
            text = out.getvalue()
            self.assertIn("memtrace, no stacks", text)
            self.assertIn("11251", text)
            self.assertIn("memtrace's overhead per event / stacks=\"python\"'s: 0.167", text)


if __name__ == "__main__":
    unittest.main()
