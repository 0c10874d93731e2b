#!/usr/bin/env python3
"""`memtrace export --format pprof` read by the real `go tool pprof` (ctest pprof_go_tool).

Writes export_traces.h's pprof trace (pprof_fixture), exports it, runs `go tool pprof -top -sample_index=NAME` on
the profile for three of its sample types, and checks pprof's table lines exactly (the values of
pprof_export_test.cc, as pprof prints them). go runs with HOME, GOCACHE, GOPATH and PPROF_TMPDIR in the work folder
and TZ=UTC, so that it needs nothing of the machine's user. Without go: a failure where CI=true (CI must run it),
else exit 77, which ctest reports as skipped.
"""
import argparse
import os
import subprocess
import sys

# `go tool pprof -top` lines from the "Showing nodes" line on, per sample index.
EXPECTED = {
    # At the peak (12 MiB): b2 (8 MiB, stack 2) and b1 (4 MiB, stack 1); main is the caller of both.
    "inuse_space": [
        "Showing nodes accounting for 12MB, 100% of 12MB total",
        "      flat  flat%   sum%        cum   cum%",
        "       8MB 66.67% 66.67%        8MB 66.67%  train.py:21 step",
        "       4MB 33.33%   100%        4MB 33.33%  train.py:20 step",
        "         0     0%   100%       12MB   100%  train.py:10 main",
    ],
    # At exit: b1 and b3 (4 + 2 MiB), both from stack 1.
    "exit_space": [
        "Showing nodes accounting for 6MB, 100% of 6MB total",
        "      flat  flat%   sum%        cum   cum%",
        "       6MB   100%   100%        6MB   100%  train.py:20 step",
        "         0     0%   100%        6MB   100%  train.py:10 main",
    ],
    # Every allocation: b1, b3 (stack 1) and b2 (stack 2).
    "alloc_objects": [
        "Showing nodes accounting for 3, 100% of 3 total",
        "      flat  flat%   sum%        cum   cum%",
        "         2 66.67% 66.67%          2 66.67%  train.py:20 step",
        "         1 33.33%   100%          1 33.33%  train.py:21 step",
        "         0     0%   100%          3   100%  train.py:10 main",
    ],
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--go", required=True)
    parser.add_argument("--memtrace", required=True)
    parser.add_argument("--fixture", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    go = args.go if args.go and not args.go.endswith("NOTFOUND") else None  # CMake's find_program
    if not go:
        if os.environ.get("CI") == "true":
            print("pprof_go_tool: FAILED: `go` not found; CI must install Debian's golang-go (scripts/bootstrap)")
            return 1
        print("pprof_go_tool: skipped: `go` not found (install golang-go to run it)")
        return 77
    os.makedirs(args.work, exist_ok=True)
    trace = os.path.join(args.work, "pprof.mtrace")
    profile = os.path.join(args.work, "pprof.pb.gz")
    subprocess.run([args.fixture, trace], check=True)
    subprocess.run([args.memtrace, "export", "--format", "pprof", trace, "-o", profile], check=True)
    env = dict(os.environ, HOME=os.path.join(args.work, "home"), GOCACHE=os.path.join(args.work, "gocache"),
               GOPATH=os.path.join(args.work, "gopath"), PPROF_TMPDIR=os.path.join(args.work, "pprof"), TZ="UTC")
    failures = 0
    for index, expected in EXPECTED.items():
        run = subprocess.run([go, "tool", "pprof", "-top", "-sample_index=" + index, profile], env=env,
                             capture_output=True, text=True)
        lines = run.stdout.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("Showing nodes")), len(lines))
        got = lines[start:]
        if run.returncode != 0 or got != expected:
            failures += 1
            print("pprof_go_tool: -sample_index=%s: go tool pprof exited %d; expected:\n%s\ngot:\n%s\nstderr:\n%s" %
                  (index, run.returncode, "\n".join(expected), run.stdout, run.stderr))
        if "Type: " + index not in lines:
            failures += 1
            print("pprof_go_tool: -sample_index=%s: no 'Type: %s' line in:\n%s" % (index, index, run.stdout))
    if failures:
        return 1
    print("pprof_go_tool: go tool pprof -top reads the export: %s as expected" % ", ".join(EXPECTED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
