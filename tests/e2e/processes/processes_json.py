"""The `processes` list of `memtrace summary DIR --json` (docs/many-processes.md; one entry per trace, the figures of
analyzer/fleet/process_summary.h), reduced to what the many-process checks compare, and compared entry by entry.

Each process becomes (pid, ppid, host, parent, devices) with parent the index of its traced parent in the list (None
where none was traced) and devices {ordinal: {"gpu", "peak_allocated_bytes", "peak_allocated_unix_ns",
"peak_reserved_bytes", "final_allocated_bytes", "final_reserved_bytes"}}, every value as the document gives it.
"""
import json
import subprocess


def _timed(device, name):
    """(bytes, unix_ns) of a TimedBytes figure: {"bytes", "unix_ns"} under `name` (analyzer/fleet/process_summary.cc)."""
    value = device.get(name) or {}
    return value.get("bytes"), value.get("unix_ns")


def _device(device):
    peak_allocated, peak_allocated_unix_ns = _timed(device, "peak_allocated")
    peak_reserved, _ = _timed(device, "peak_reserved")
    return {
        "gpu": device.get("gpu"),
        "peak_allocated_bytes": peak_allocated,
        "peak_allocated_unix_ns": peak_allocated_unix_ns,
        "peak_reserved_bytes": peak_reserved,
        "final_allocated_bytes": device.get("final_allocated_bytes"),
        "final_reserved_bytes": device.get("final_reserved_bytes"),
    }


def processes(document):
    """The reduced processes list of a summary --json document (an empty list where it has none)."""
    reduced = []
    for entry in document.get("processes", []):
        reduced.append({
            "pid": entry.get("pid"),
            "ppid": entry.get("ppid"),
            "host": entry.get("host"),
            "parent": entry.get("parent"),
            "devices": {d.get("ordinal"): _device(d) for d in entry.get("devices", [])},
        })
    return reduced


def check_processes(case, document, expected):
    """Checks the document's processes, in order, against `expected` (a list of reduced processes, with only the
    device keys given checked), and that there are no others."""
    measured = processes(document)
    case.check("processes: (pid, host) in order", [(p["pid"], p["host"]) for p in expected],
               [(p["pid"], p["host"]) for p in measured])
    for index, (want, got) in enumerate(zip(expected, measured)):
        label = f"processes[{index}] (pid {want['pid']} on {want['host']})"
        case.check(f"{label} ppid", want["ppid"], got["ppid"])
        case.check(f"{label} parent", want["parent"], got["parent"])
        case.check(f"{label} devices", sorted(want["devices"]), sorted(got["devices"]))
        for ordinal, figures in want["devices"].items():
            for key, value in figures.items():
                case.check(f"{label} device {ordinal} {key}", value, got["devices"].get(ordinal, {}).get(key))


def skip_without_many_traces(case, directory):
    """Exits 77 (ctest: skipped) when this memtrace reads one trace only (`summary DIR` answers that DIR is a
    directory, not a trace): the many-trace summary is not built in yet. Any other answer goes on to the checks."""
    proc = subprocess.run([case.args.memtrace, "summary", directory, "--json"], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0 and "is a directory, not a memtrace trace" in proc.stderr:
        print(f"SKIP: this memtrace does not read many traces yet: {proc.stderr.strip()}")
        raise SystemExit(77)


def summary_of_many(case, directory):
    """`memtrace summary DIRECTORY --json`, parsed, and checked against the contract's many-trace shape (the "fleet"
    $def of docs/schema/memtrace.schema.json): the check `summary DIR --json matches the schema` lists every
    violation. Exits 77 first where this memtrace reads one trace only (skip_without_many_traces)."""
    skip_without_many_traces(case, directory)
    argv = [case.args.memtrace, "summary", directory, "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(argv)} exited with {proc.returncode}: {proc.stderr}")
    document = json.loads(proc.stdout)
    violations = case.contract.violations(document, "fleet")
    for violation in violations:
        print(f"schema violation in memtrace summary {directory} --json: {violation}")
    case.check("summary DIR --json matches the schema", 0, len(violations))
    return document
