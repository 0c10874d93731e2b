"""The JSON contract holds on the recorded example traces, and it can fail.

Runs `memtrace summary|leaks|oom|peak TRACE --json` and `memtrace timeline TRACE --json` (with and without
--interval) on every examples/*.mtrace and on the traces --more-traces-writer writes (traces that began by attach), and `memtrace diff BEFORE AFTER --json` on every pair of them, and validates
each document against docs/schema/memtrace.schema.json. Then breaks
copies of those documents one way each (a required key removed, an unknown key added, a wrong type, a
contradiction between keys) and checks that the schema rejects every one: a schema that accepts anything would
pass the first half.
"""
import argparse
import copy
import glob
import json
import os
import subprocess
import sys

import json_schema

parser = argparse.ArgumentParser()
parser.add_argument("--memtrace", required=True)
parser.add_argument("--schema", required=True)
parser.add_argument("--examples-dir", required=True)
parser.add_argument("--more-traces-writer", help="a program that writes more traces into the folder it is given")
args = parser.parse_args()
contract = json_schema.Contract(args.schema)
failures = 0


def check(name, expected, measured):
    global failures
    ok = expected == measured
    print(f"check {name}: expected {expected}, measured {measured}: {'ok' if ok else 'FAIL'}")
    failures += not ok


def memtrace_json(argv):
    proc = subprocess.run([args.memtrace] + argv, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"FAIL: memtrace {' '.join(argv)} exited with {proc.returncode}: {proc.stderr}")
    return json.loads(proc.stdout)


traces = sorted(glob.glob(os.path.join(args.examples_dir, "*.mtrace")))
check("example traces found", 3, len(traces))
documents = {}  # (trace name, shape) -> document
for trace in traces:
    name = os.path.basename(trace)
    runs = [("summary", ["summary", trace, "--json"]), ("leaks", ["leaks", trace, "--json"]),
            ("oom", ["oom", trace, "--json"]), ("timeline", ["timeline", trace, "--json"]),
            ("timeline", ["timeline", trace, "--json", "--interval", "0.5"]), ("peak", ["peak", trace, "--json"])]
    for shape, argv in runs:
        document = memtrace_json(argv)
        documents.setdefault((name, shape), document)
        violations = contract.violations(document, shape)
        for violation in violations:
            print(f"schema violation in memtrace {' '.join(argv[:1] + argv[2:])} {name}: {violation}")
        check(f"{' '.join(argv[:1] + argv[2:])} {name}: violations", 0, len(violations))
        check(f"{' '.join(argv[:1] + argv[2:])} {name}: matches exactly one shape", 0,
              len(contract.violations(document)))

# The examples together: `timeline A B C --json`, each GPU's combined rows (and with --interval).
for options in (["--json"], ["--json", "--interval", "0.5"]):
    argv = ["timeline"] + traces + options
    document = memtrace_json(argv)
    documents.setdefault(("all", "timeline_combined"), document)
    violations = contract.violations(document, "timeline_combined")
    for violation in violations:
        print(f"schema violation in memtrace timeline {' '.join(options)} of all examples: {violation}")
    check(f"timeline {' '.join(options)} of all examples: violations", 0, len(violations))
    check(f"timeline {' '.join(options)} of all examples: matches exactly one shape", 0,
          len(contract.violations(document)))

for before in traces:
    for after in traces:
        argv = ["diff", before, after, "--json"]
        name = f"{os.path.basename(before)} {os.path.basename(after)}"
        document = memtrace_json(argv)
        documents.setdefault((name, "diff"), document)
        violations = contract.violations(document, "diff")
        for violation in violations:
            print(f"schema violation in memtrace diff --json {name}: {violation}")
        check(f"diff --json {name}: violations", 0, len(violations))
        check(f"diff --json {name}: matches exactly one shape", 0, len(contract.violations(document)))

# Many traces: summary, leaks and oom of every example at once (the fleet shape), and merge of their summaries.
summary_files = []
for trace in traces:
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"check_json_schema.{os.getpid()}.{os.path.basename(trace)}.json")
    with open(path, "w") as f:
        json.dump(documents[(os.path.basename(trace), "summary")], f)
    summary_files.append(path)
for argv in (["summary"] + traces + ["--json"], ["leaks"] + traces + ["--json"], ["oom"] + traces + ["--json"],
             ["summary", args.examples_dir, "--json"], ["merge"] + summary_files + ["--json"]):
    document = memtrace_json(argv)
    documents.setdefault(("all examples", "fleet"), document)
    label = f"{argv[0]} of the examples --json"
    violations = contract.violations(document, "fleet")
    for violation in violations:
        print(f"schema violation in {label}: {violation}")
    check(f"{label}: violations", 0, len(violations))
    check(f"{label}: matches exactly one shape", 0, len(contract.violations(document)))
for path in summary_files:
    os.remove(path)


def broken(name, shape, label, edit):
    """A copy of the document of (name, shape) broken by edit(doc) must be rejected."""
    document = copy.deepcopy(documents[(name, shape)])
    edit(document)
    check(f"{shape} {name} with {label}: rejected", True, len(contract.violations(document, shape)) > 0)


def set_key(obj, key, value):
    obj[key] = value


LEAK, OOM = "train_leak.mtrace", "torch_oom.mtrace"
broken("all examples", "fleet", "a process without parent", lambda d: d["processes"][0].pop("parent"))
broken("all examples", "fleet", "an unknown process key", lambda d: set_key(d["processes"][0], "rank0", 1))
broken("all examples", "fleet", "a GPU's sum as a string", lambda d: set_key(d["gpus"][0], "sum_of_peak_reserved_bytes", "1"))
broken(LEAK, "summary", "processes removed", lambda d: d.pop("processes"))
broken(LEAK, "summary", "trace.events removed", lambda d: d["trace"].pop("events"))
broken(LEAK, "summary", "an unknown device key", lambda d: set_key(d["devices"][0], "peak_bytes", 1))
broken(LEAK, "summary", "a negative byte figure", lambda d: set_key(d["devices"][0], "final_driver_bytes", -1))
broken(LEAK, "summary", "a byte figure as a string", lambda d: set_key(d["devices"][0], "peak_driver_bytes", "1"))
broken(LEAK, "summary", "segment_count null where segments are known",
       lambda d: set_key(d["devices"][0]["fragmentation"]["final"], "segment_count", None))
broken(LEAK, "summary", "start_monotonic_ns without pid", lambda d: d["trace"].pop("pid"))
broken(LEAK, "summary", "dropped_events removed beside an end record", lambda d: d["trace"].pop("dropped_events"))
broken(LEAK, "leaks", "native_frames_cut removed", lambda d: d["leaks"][0].pop("native_frames_cut"))
broken(LEAK, "leaks", "an unknown call-site key", lambda d: set_key(d["leaks"][0], "site", 1))
broken(LEAK, "leaks", "merged_stack_count 1", lambda d: set_key(d["leaks"][0], "merged_stack_count", 1))
broken(OOM, "leaks", "a native frame without module",
       lambda d: next(f for f in d["leaks"][0]["frames"] if not f["python"]).pop("module"))
broken(OOM, "leaks", "a Python frame with module_offset",
       lambda d: set_key(next(f for f in d["leaks"][0]["frames"] if f["python"]), "module_offset", 0))
broken(OOM, "oom", "diagnoses removed", lambda d: d["ooms"][0].pop("diagnoses"))
broken(LEAK, "summary", "peak_breakdown without its rows", lambda d: d["devices"][0]["peak_breakdown"].pop("rows"))
broken(LEAK, "peak", "an unknown breakdown row",
       lambda d: set_key(d["peaks"][0]["breakdown"]["rows"], "weights", {"bytes": 0, "count": 0}))
broken(OOM, "oom", "an unknown diagnosis", lambda d: set_key(d["ooms"][0]["diagnoses"][0], "cause", "bad_luck"))
broken(OOM, "oom", "call sites null without a reason", lambda d: set_key(d["ooms"][0], "live_call_sites", None))
broken(OOM, "oom", "device_usage without after_oom", lambda d: set_key(d["ooms"][0], "device_usage", {
    "time_s": 0, "api": "NVML", "device_free_bytes": 0, "device_total_bytes": 0, "process_used_bytes": None,
    "other_processes_used_bytes": None, "accounted_bytes": 0, "context_and_unattributed_bytes": None}))
broken(OOM, "summary", "an OOM's requested_bytes removed", lambda d: d["ooms"][0].pop("requested_bytes"))
broken(LEAK, "timeline", "a row's time_s as a string", lambda d: set_key(d["rows"][0], "time_s", "0.1"))
broken(LEAK, "timeline", "a row's driver_bytes removed", lambda d: d["rows"][0].pop("driver_bytes"))
broken(LEAK, "timeline", "truncated_tail on a complete trace", lambda d: set_key(d["trace"], "truncated_tail", ""))
broken("all", "timeline_combined", "a row's unix_ns as a string",
       lambda d: set_key(d["gpus"][0]["rows"][0], "unix_ns", "1"))
broken("all", "timeline_combined", "a peak without its shares",
       lambda d: d["gpus"][0]["peak_allocated"].pop("process_allocated_bytes"))
DIFF = "torch_oom.mtrace train_leak.mtrace"
broken(DIFF, "diff", "a gone site with an after side",
       lambda d: set_key(next(s for s in d["sites"] if s["status"] == "gone"), "after",
                         {"peak_bytes": 0, "peak_count": 0, "growth_bytes": 0}))
broken(DIFF, "diff", "a negative peak_bytes", lambda d: set_key(d["sites"][0]["after"] or d["sites"][0]["before"],
                                                                "peak_bytes", -1))
broken(DIFF, "diff", "an unknown device status", lambda d: set_key(d["devices"][0], "status", "moved"))
broken(DIFF, "diff", "sites removed", lambda d: d.pop("sites"))
broken(DIFF, "diff", "a note of an unknown kind", lambda d: set_key(d["notes"][0], "kind", "looks_fixed"))
broken(DIFF, "diff", "notes removed", lambda d: d.pop("notes"))
# A document of one command is not another's.
check("summary document as leaks: rejected", True, len(contract.violations(documents[(LEAK, "summary")], "leaks")) > 0)
check("leaks document as summary: rejected", True, len(contract.violations(documents[(LEAK, "leaks")], "summary")) > 0)

# Traces of other origins than the examples' (attach, snapshot: `trace.attach`), written by the test's own program.
if args.more_traces_writer:
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        written = subprocess.run([args.more_traces_writer, folder], capture_output=True, text=True, check=True)
        more = written.stdout.split()
        check("more traces written", True, len(more) > 0)
        for trace in more:
            name = os.path.basename(trace)
            for shape, argv in (("summary", ["summary", trace, "--json"]), ("leaks", ["leaks", trace, "--json"]),
                                ("oom", ["oom", trace, "--json"]), ("peak", ["peak", trace, "--json"])):
                document = memtrace_json(argv)
                violations = contract.violations(document, shape)
                for violation in violations:
                    print(f"schema violation in memtrace {argv[0]} --json {name}: {violation}")
                check(f"{argv[0]} --json {name}: violations", 0, len(violations))
                check(f"{argv[0]} --json {name}: has trace.attach", True, "attach" in document["trace"])
                if shape == "summary":
                    bad = copy.deepcopy(document)
                    bad["trace"]["attach"]["unknown_key"] = 1
                    check(f"summary --json {name} with an unknown key in trace.attach: rejected", True,
                          len(contract.violations(bad, shape)) > 0)
                    bad = copy.deepcopy(document)
                    del bad["trace"]["attach"]["devices"]
                    check(f"summary --json {name} without trace.attach.devices: rejected", True,
                          len(contract.violations(bad, shape)) > 0)

if failures:
    print(f"{failures} check(s) failed")
    sys.exit(1)
print("all checks passed")
