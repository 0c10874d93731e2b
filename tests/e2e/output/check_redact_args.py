"""No environment variable is recorded; the command line is, unless MEMTRACE_REDACT_ARGS=1.

e2e_alloc_basic --token=ARG_SECRET (5 events) with E2E_SECRET_VALUE=ENV_SECRET in its environment,
where the two secrets are distinctive strings that appear nowhere else. The whole decompressed trace
(`zstd -dc`) is searched:
  default:                TraceStart.argv = [program, "--token=..."]; ENV_SECRET nowhere in the bytes
  MEMTRACE_REDACT_ARGS=1: TraceStart.argv = []; neither secret anywhere in the bytes
  MEMTRACE_REDACT_ARGS=TRUE (any case of 1/true/yes/on): as =1
  MEMTRACE_REDACT_ARGS=maybe (not a boolean): as =1, and one line says so:
      memtrace: MEMTRACE_REDACT_ARGS="maybe" is not 1/0, true/false, yes/no or on/off; using 1 (the command line
      is not recorded)
Every run: 5 events.
"""
import os
import subprocess

import e2e_lib
import faults_lib

ARG_SECRET = "argument-c0ffee-4711"
ENV_SECRET = "environment-beef-0815"

case = e2e_lib.Case()
program = case.program("alloc_basic")
UNREADABLE = ('memtrace: MEMTRACE_REDACT_ARGS="maybe" is not 1/0, true/false, yes/no or on/off; using 1 '
              '(the command line is not recorded)')
runs = [  # (value of MEMTRACE_REDACT_ARGS or None, file name, redacted, warnings on stderr)
    (None, "default", False, []),
    ("1", "redacted", True, []),
    ("TRUE", "redacted-true", True, []),
    ("maybe", "redacted-unreadable", True, [UNREADABLE]),
]
for value, name, redact, warnings in runs:
    label = f"MEMTRACE_REDACT_ARGS={value}" if value is not None else "default"
    path = os.path.join(case.args.out_dir, f"{name}.mtrace")
    extra = {"MEMTRACE_OUTPUT": path, "E2E_SECRET_VALUE": ENV_SECRET}
    if value is not None:
        extra["MEMTRACE_REDACT_ARGS"] = value
    _, outcome = faults_lib.run([program, f"--token={ARG_SECRET}"], faults_lib.traced_env(case, extra), timeout=30)
    faults_lib.echo(outcome, label)
    case.check(f"{label}: exit status", 0, outcome.exit_status)
    case.check(f"{label}: warnings", warnings,
               [line for line in faults_lib.memtrace_lines(outcome.stderr) if "MEMTRACE_REDACT_ARGS" in line])
    if not os.path.exists(path):
        case.check(f"{label}: trace written", True, False)
        continue
    trace = faults_lib.trace_file.TraceFile(path)
    case.check(f"{label}: events", 5, len(trace.events()))
    case.check(f"{label}: TraceStart.argv", [] if redact else [program, f"--token={ARG_SECRET}"], trace.argv())
    text = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    case.check(f"{label}: environment value in the decompressed trace", False, ENV_SECRET.encode() in text)
    case.check(f"{label}: argument in the decompressed trace", not redact, ARG_SECRET.encode() in text)
case.finish()
