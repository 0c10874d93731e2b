"""Shared by the check_*.py end-to-end tests: run a program under libmemtrace.so against the CUDA test
double, run the analyzer on its trace, and compare exact values.

Every check prints one line `check <name>: expected <x>, measured <y>: ok|FAIL`; finish() exits 1 when
any failed, so ctest shows every difference of a case at once, not just the first. Every `--json` document
analyze() reads is also checked against the JSON contract, docs/schema/memtrace.schema.json (--schema).
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import json_schema

MIB = 1 << 20


class Case:
    def __init__(self, add_arguments=None):
        """add_arguments(parser), when given, declares the checker's own flags."""
        parser = argparse.ArgumentParser()
        if add_arguments:
            add_arguments(parser)
        for flag in ("--preload", "--memtrace", "--fake-lib-dir", "--program-dir", "--source-dir", "--out-dir",
                     "--schema"):
            parser.add_argument(flag, required=True)
        parser.add_argument("--python", default=sys.executable, help="interpreter for Python programs")
        self.args = parser.parse_args()
        self.failures = 0
        self.contract = json_schema.Contract(self.args.schema)
        shutil.rmtree(self.args.out_dir, ignore_errors=True)
        os.makedirs(self.args.out_dir)

    def program(self, name):
        return os.path.join(self.args.program_dir, "e2e_" + name)

    def source(self, name):
        return os.path.join(self.args.source_dir, name)

    def env(self, extra=None):
        env = dict(os.environ)
        env["LD_PRELOAD"] = self.args.preload
        env["LD_LIBRARY_PATH"] = self.args.fake_lib_dir
        env["MEMTRACE_OUTPUT"] = os.path.join(self.args.out_dir, "trace-%p.mtrace")
        env["MEMTRACE_FLUSH_MS"] = "50"
        env.setdefault("FAKECUDA_DEVICES", "2")
        env.setdefault("FAKECUDA_TOTAL_BYTES", str(1 << 30))
        env.pop("PYTHONPATH", None)
        env.update(extra or {})
        return env

    def run_traced(self, argv, extra_env=None, expect_trace=True):
        """Runs argv under the tracer; returns (stdout, trace path or None). Exits on a failed program."""
        proc = subprocess.run(argv, env=self.env(extra_env), capture_output=True, text=True, timeout=120)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            sys.exit(f"FAIL: {' '.join(argv)} exited with {proc.returncode}")
        traces = sorted(glob.glob(os.path.join(self.args.out_dir, "*")))
        if not expect_trace:
            return proc.stdout, None
        if len(traces) != 1:
            sys.exit(f"FAIL: expected exactly one trace file in {self.args.out_dir}, found {traces}")
        return proc.stdout, traces[0]

    def analyze(self, command, trace):
        """`memtrace <command> TRACE --json` (command: summary, leaks or oom), parsed. A document that breaks the
        JSON contract fails the check `<command> --json matches the schema`, with every violation listed."""
        proc = subprocess.run([self.args.memtrace, command, trace, "--json"], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            sys.exit(f"FAIL: memtrace {command} {trace} --json exited with {proc.returncode}: {proc.stderr}")
        document = json.loads(proc.stdout)
        violations = self.contract.violations(document, command)
        for violation in violations:
            print(f"schema violation in memtrace {command} {trace} --json: {violation}")
        self.check(f"{command} --json matches the schema", 0, len(violations))
        return document

    def dump_events(self, trace, frames=False):
        """Every Event of the trace as `memtrace dump` prints it, without its "record" key (one dict each, in order;
        with `frames`, an event with a stack also has native_frames and python_frames, and native_frames_cut and
        python_frames_cut). Exits on a trace memtrace dump cannot read."""
        events = []
        for record in self.dump_records(trace, frames):
            if record.pop("record") == "event":
                events.append(record)
        return events

    def dump_start(self, trace):
        """The trace's TraceStart and Device records as `memtrace dump` prints them (one dict each, "record" included,
        in file order). Exits on a trace memtrace dump cannot read."""
        return [record for record in self.dump_records(trace) if record["record"] in ("start", "device")]

    def dump_records(self, trace, frames=False):
        """Every record of the trace as `memtrace dump` prints it (one dict each, in file order)."""
        argv = [self.args.memtrace, "dump", trace] + (["--frames"] if frames else [])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            sys.exit(f"FAIL: {' '.join(argv)} exited with {proc.returncode}: {proc.stderr}")
        return [json.loads(line) for line in proc.stdout.splitlines()]

    def check(self, name, expected, measured):
        ok = expected == measured
        print(f"check {name}: expected {expected}, measured {measured}: {'ok' if ok else 'FAIL'}")
        if not ok:
            self.failures += 1

    def check_devices(self, summary, expected):
        """expected: {device ordinal: {json key: value}}; also checks that no other device has memory."""
        devices = {d["device"]: d for d in summary.get("devices", [])}
        for ordinal, values in expected.items():
            measured = devices.get(ordinal, {})
            for key, value in values.items():
                self.check(f"device {ordinal} {key}", value, measured.get(key))
        for ordinal, measured in devices.items():
            if ordinal not in expected:
                self.check(f"device {ordinal} peak_driver_bytes (no memory expected)", 0,
                           measured.get("peak_driver_bytes"))

    def check_health(self, summary, events):
        """events: the number of Event records the program must produce (each allocation and free once)."""
        trace = summary.get("trace", {})
        self.check("trace.truncated", False, trace.get("truncated"))
        self.check("trace.events", events, trace.get("events"))
        self.check("trace.unknown_frees", 0, trace.get("unknown_frees"))
        self.check("trace.double_frees", 0, trace.get("double_frees"))

    def finish(self):
        if self.failures:
            print(f"{self.failures} check(s) failed")
            sys.exit(1)
        print("all checks passed")


def marker_line(path, marker):
    """1-based number of the only line of `path` containing `marker`."""
    with open(path) as f:
        lines = [n for n, text in enumerate(f, 1) if marker in text]
    if len(lines) != 1:
        sys.exit(f"FAIL: {path}: marker {marker!r} found on lines {lines}, expected exactly one")
    return lines[0]


def has_frame(frames, file_suffix=None, line=None, function_part=None):
    for frame in frames:
        if file_suffix is not None and not str(frame.get("file", "")).endswith(file_suffix):
            continue
        if line is not None and frame.get("line") != line:
            continue
        if function_part is not None and function_part not in str(frame.get("function", "")):
            continue
        return True
    return False


def control_request(path, line, timeout_s=30):
    """One request line to a tracer's control socket (proto/control_protocol.h) and its reply line."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        s.sendall((line + "\n").encode())
        return s.makefile().readline().rstrip("\n")


def wait_for_file(path, timeout_s=10):
    """Whether `path` exists within `timeout_s` seconds."""
    deadline = time.time() + timeout_s
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.02)
    return os.path.exists(path)
