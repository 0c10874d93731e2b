#!/usr/bin/env python3
"""`memtrace report` of many traces, on the job make_fleet_traces writes (its header comment works out the figures).

  check_fleet_traces.py MEMTRACE MAKE_FLEET_TRACES DIR OUT.html

Writes the traces into DIR, then checks:
  - `memtrace report DIR/ -o OUT.html`: exit 0, and the page's data (docs/report.md, "The data of many processes")
    holds exactly the job's figures: GPU A's combined timeline and its peak with who held what, the ranks with
    rank 1 the worst, rank 1's wrong device with its call site, the leaks merged by call site;
  - `memtrace report A B -o ...` (the two files named): the same data;
  - a missing input beside a trace: exit 2, one line naming it, and the page of the trace that read;
  - -o naming one of the traces: exit 2, one line, the trace unchanged.
Exit 0, or 1 with one line per failure.
"""
import json
import os
import subprocess
import sys

MiB = 1 << 20
MS = 1_000_000
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def page_data(path):
    html = open(path, encoding="utf-8").read()
    opening = '<script id="memtrace-data" type="application/json">'
    start = html.index(opening) + len(opening)
    return json.loads(html[start:html.index("</script>", start)])


def run(*args):
    return subprocess.run(args, capture_output=True, text=True)


def check_job(data, where):
    def same(got, expected, what):
        check(got == expected, f"{where}: {what}: {json.dumps(got)}, expected {json.dumps(expected)}")

    same(data["kind"], "fleet", "kind")
    same(data["origin_unix_ns"], "1796205600000000000", "origin")
    same([(p["pid"], p["rank"], p["local_rank"], p["host"], p["start_ns"]) for p in data["processes"]],
         [(1000, 0, 0, "node1", 0), (1001, 1, 1, "node1", 5 * MS)], "processes")
    same([(d["ordinal"], d["gpu_index"], d["peak_allocated"]) for d in data["processes"][1]["devices"]],
         [(0, 0, {"bytes": 50 * MiB, "time_ns": 20 * MS}), (1, 1, {"bytes": 400 * MiB, "time_ns": 10 * MS})],
         "rank 1's devices")
    same(data["tree"], [{"process": 0, "depth": 0}, {"process": 1, "depth": 0}], "tree")
    same([(g["ordinal"], [u["process"] for u in g["users"]]) for g in data["gpus"]], [(0, [0, 1]), (1, [1])],
         "GPUs and their users")
    combined = data["gpus"][0]["combined"] or {}
    # Each process's memory ends with it: both end at T+100 ms, rank 0 first (member order).
    same(combined.get("points", {}).get("t_ns"), [10 * MS, 20 * MS, 30 * MS, 50 * MS, 100 * MS, 100 * MS],
         "GPU A's combined times")
    same(combined.get("points", {}).get("allocated_bytes"), [100 * MiB, 150 * MiB, 350 * MiB, 250 * MiB, 50 * MiB, 0],
         "GPU A's combined allocated")
    same(combined.get("points", {}).get("member_allocated_bytes"),
         [[100 * MiB, 100 * MiB, 300 * MiB, 200 * MiB, 0, 0], [0, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 0]],
         "each rank's share")
    peak = combined.get("peak_allocated", {})
    same((peak.get("time_ns"), peak.get("allocated_bytes"), peak.get("member_allocated_bytes")),
         (30 * MS, 350 * MiB, [300 * MiB, 50 * MiB]), "GPU A's combined peak and who held what")
    same(data["gpus"][1]["combined"], None, "GPU B (one process) has no combined timeline")
    same(data["summary"]["largest_combined_peak"], {"gpu": 0, "allocated_bytes": 350 * MiB, "time_ns": 30 * MS},
         "largest combined peak")
    ranks = data["ranks"]
    same([(r["rank"], r["ordinal"], r["peak_allocated"]["bytes"], r["leaked_bytes"]) for r in ranks["rows"]],
         [(0, 0, 300 * MiB, 200 * MiB), (1, 1, 400 * MiB, 450 * MiB)], "rank rows")
    same((ranks["worst"], ranks["peak_allocated_spread_bytes"], ranks["median_peak_allocated_bytes"]),
         (1, 100 * MiB, 300 * MiB), "worst rank, spread, median")
    same([(w["process"], w["ordinal"], w["local_ordinal"], w["peak_allocated_bytes"], w["first_allocation_ns"],
           w["first_allocation_site"]) for w in data["wrong_devices"]],
         [(1, 0, 1, 50 * MiB, 20 * MS, "train.py:12 setup")], "wrong devices")
    same([(l["site"], l["bytes"], l["count"], l["processes"]) for l in data["leaks"]],
         [("train.py:31 main", 600 * MiB, 2, [0, 1]), ("train.py:12 setup", 50 * MiB, 1, [1])], "merged leaks")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    memtrace, make, directory, out = sys.argv[1:]
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        if name.endswith(".mtrace"):
            os.remove(os.path.join(directory, name))
    made = run(make, directory)
    if made.returncode != 0:
        sys.exit(f"check_fleet_traces: make_fleet_traces failed: {made.stderr}")
    a, b = os.path.join(directory, "job-1000.mtrace"), os.path.join(directory, "job-1001.mtrace")

    r = run(memtrace, "report", directory + "/", "-o", out)
    check(r.returncode == 0 and r.stderr == "", f"report DIR/: exit {r.returncode}, stderr {r.stderr!r}")
    if r.returncode == 0:
        check_job(page_data(out), "report DIR/")

    named = out + ".two.html"
    r = run(memtrace, "report", a, b, "-o", named)
    check(r.returncode == 0, f"report A B: exit {r.returncode}, stderr {r.stderr!r}")
    if r.returncode == 0:
        check_job(page_data(named), "report A B")

    missing = os.path.join(directory, "missing.mtrace")
    partial = out + ".partial.html"
    r = run(memtrace, "report", a, missing, "-o", partial)
    lines = r.stderr.splitlines()
    check(r.returncode == 2 and len(lines) == 1 and missing in lines[0],
          f"report A MISSING: exit {r.returncode}, stderr {r.stderr!r}: expected exit 2 and one line naming it")
    if os.path.exists(partial):
        check([p["pid"] for p in page_data(partial)["processes"]] == [1000], "report A MISSING: the page of A")
    else:
        failures.append("report A MISSING: no page of the trace that read")

    before = open(b, "rb").read()
    r = run(memtrace, "report", a, b, "-o", b)
    lines = r.stderr.splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "is the trace being read" in lines[0],
          f"report A B -o B: exit {r.returncode}, stderr {r.stderr!r}")
    check(open(b, "rb").read() == before, "report A B -o B changed the trace B")

    for f in failures:
        print("check_fleet_traces: FAIL: " + f, file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f"check_fleet_traces: {out}: the job's figures exact; two files, a missing input and -o a trace as they should")


if __name__ == "__main__":
    main()
