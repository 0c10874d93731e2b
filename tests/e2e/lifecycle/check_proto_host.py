"""A host program with its own memtrace.proto classes and protobuf runtime, traced: no "File already
exists in database", no crash; memtrace's library itself depends on no protobuf runtime.

--variant lite: the project's lite classes (target memtrace_proto); --variant full: full-runtime classes
of a copy of memtrace.proto, whose descriptor registers "memtrace.proto" in the generated pool at load.
e2e_proto_host_VARIANT: a Record round trip, then alloc 4 MiB, free 4 MiB (2 events), exit status 0.
"""
import os
import subprocess

import e2e_lib
import faults_lib


def add_arguments(parser):
    parser.add_argument("--variant", choices=["lite", "full"], required=True)


case = e2e_lib.Case(add_arguments)
needed = subprocess.run(["readelf", "-d", case.args.preload], capture_output=True, text=True, check=True).stdout
case.check("libmemtrace.so needs a protobuf library", False, "protobuf" in needed)
_, outcome = faults_lib.run([case.program(f"proto_host_{case.args.variant}")], faults_lib.traced_env(case),
                            timeout=30)
faults_lib.echo(outcome, f"e2e_proto_host_{case.args.variant}")
case.check("exit status", 0, outcome.exit_status)
case.check("round trip done", True, any(line.startswith("round trip of") for line in outcome.stdout.splitlines()))
case.check("'File already exists in database' on stderr", False, "File already exists in database" in outcome.stderr)
trace = faults_lib.only_trace(case)
case.check("events", ["alloc 4 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
case.finish()
