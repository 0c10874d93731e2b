"""Compares the traces of tests/gpu/attach_job.py's attached run with the job's own figures; used by
scripts/gpu-check's `attach` group.

    attach_checks.py NAME --dir DIR --memtrace BIN --mode injected|dormant

DIR is attach_job.py launch's directory (launch.json, reference.json, attached.json, traces/). Prints one
`check ...: ok|FAIL` line per check (as tests/gpu/checks.py); exit 1 when any failed, 2 when an input cannot be read.

What is compared:
  - every memtrace command (attach, detach, attach, detach) exited 0, and the job and its untraced reference too;
  - the job's losses, step by step, equal the reference's exactly (attach and detach changed nothing it computes),
    and its stdout is the reference's;
  - two traces, one per attach, each beginning by attach (origin, attach number 1 then 2) and ending by DETACH;
  - for every step sample taken while a trace ran (5 ms of quiet on either side of it), the trace's allocated and
    reserved at that moment (`memtrace timeline --json`: the last row at or before it) equal the job's own
    torch.cuda.memory_allocated() and memory_reserved(), byte for byte; at least 20 samples per trace;
  - the trace's health: no free of an unknown address (frees of blocks made before attach are matched against
    the live set at attach), no disagreement with PyTorch's own allocated total at any allocator report;
  - while attached, the driver layer was seen (the 96 MiB temporary's segment) where CUPTI was free to subscribe;
    where another subscriber held it (--profile: Kineto), the attach said so in one line and the trace records the
    PyTorch layer only (TraceStart.driver_layer_attached false, Notice CUPTI_BUSY).
"""
import argparse
import bisect
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checker, load_json  # noqa: E402


def run_json(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
    return json.loads(r.stdout), None


def figures_at(rows, start_ns, when_ns, device=0):
    """The allocated and reserved of the last row of `device` at or before `when_ns` (monotonic); None before any."""
    times = [start_ns + round(r["time_s"] * 1e9) for r in rows]
    i = bisect.bisect_right(times, when_ns) - 1
    while i >= 0 and rows[i]["device"] != device:
        i -= 1
    return None if i < 0 else (rows[i]["allocated_bytes"], rows[i]["reserved_bytes"])


def check_trace(c, memtrace, trace, number, samples, mode):
    label = f"trace {number} ({os.path.basename(trace)})"
    summary, err = run_json([memtrace, "summary", trace, "--json"])
    timeline, err2 = run_json([memtrace, "timeline", trace, "--json"])
    if summary is None or timeline is None:
        c.check(f"{label} reads", "summary and timeline exit 0", err or err2)
        return
    attach = summary.get("trace", {}).get("attach") or {}
    c.check(f"{label} origin", "ATTACH_DORMANT" if mode == "dormant" else "ATTACH_INJECTED", attach.get("origin"))
    c.check(f"{label} attach number", number, attach.get("attach_number"))
    health = summary.get("trace", {})
    c.check(f"{label} end", "DETACH", (health.get("end") or {}).get("how"))
    c.check(f"{label} frees of unknown addresses", 0, health.get("unknown_frees"))
    c.check(f"{label} allocator reports disagreeing with the replay", None, health.get("allocated_vs_pytorch"))
    c.info(f"{label} attach", json.dumps(attach)[:600])

    rows = timeline.get("rows", [])
    start_ns = timeline.get("trace", {}).get("start_monotonic_ns")
    if start_ns is None or not rows:
        c.check(f"{label} timeline", "rows and start_monotonic_ns", f"{len(rows)} rows, start {start_ns}")
        return
    end_ns = start_ns + round(rows[-1]["time_s"] * 1e9)
    inside = [s for s in samples if start_ns < s["monotonic_ns"] <= end_ns]
    equal, diffs = 0, []
    for s in inside:
        got = figures_at(rows, start_ns, s["monotonic_ns"])
        want = (s["allocated"], s["reserved"])
        if got == want:
            equal += 1
        else:
            diffs.append(f"step {s['step']} at +{(s['monotonic_ns'] - start_ns) / 1e6:.3f} ms: job {want}, trace {got}")
    c.check(f"{label} step samples inside the trace", ">= 20", len(inside), ok=len(inside) >= 20)
    c.check(f"{label} allocated and reserved == torch.cuda.memory_allocated()/memory_reserved() at every sample",
            f"{len(inside)} of {len(inside)} equal", f"{equal} of {len(inside)} equal" +
            (f" ({len(diffs)} differ: {'; '.join(diffs[:3])})" if diffs else ""))
    if inside:
        c.info(f"{label} steps", f"{inside[0]['step']}..{inside[-1]['step']}, allocated at the first "
               f"{inside[0]['allocated']}, at the last {inside[-1]['allocated']}")

    csv_path = trace + ".csv"
    subprocess.run([memtrace, "export", trace, "--format", "csv", "-o", csv_path], capture_output=True, timeout=120)
    try:  # the events below PyTorch's allocator: cudaMalloc/cuMemAlloc, VMM calls, cudaMallocAsync's pool blocks
        with open(csv_path) as f:
            driver_rows = [l for l in f if (",ALLOC," in l or ",FREE," in l) and ",TORCH_ALLOCATOR," not in l]
    except OSError:
        driver_rows = []
    if mode == "dormant" or attach.get("driver_layer_attached", True):  # dormant: the preloaded hooks see it
        c.check(f"{label} driver API events while attached", ">= 1", len(driver_rows), ok=len(driver_rows) >= 1)
    else:
        c.check(f"{label} driver API events while attached (CUPTI busy: the PyTorch layer only)", 0,
                len(driver_rows))
    return attach


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--dir", required=True)
    p.add_argument("--memtrace", required=True)
    p.add_argument("--mode", required=True)
    a = p.parse_args()
    c = Checker(a.name)
    launch = load_json(f"{a.dir}/launch.json", "launch log")
    ref = load_json(f"{a.dir}/reference.json", "reference samples")
    job = load_json(f"{a.dir}/attached.json", "attached samples")
    c.check("reference run exit", 0, launch.get("reference_rc"))
    c.check("attached run exit", 0, launch.get("job_rc"))
    for i, cmd in enumerate(launch.get("commands", [])):
        c.check(f"memtrace {cmd['command']} #{i + 1} exit (at step {cmd.get('step_before')})", 0, cmd.get("rc"))
        if cmd.get("rc") != 0:
            c.info(f"memtrace {cmd['command']} #{i + 1} stderr", (cmd.get("stderr") or cmd.get("error", ""))[-400:])
        else:
            c.info(f"memtrace {cmd['command']} #{i + 1}", (cmd.get("stdout") + cmd.get("stderr")).strip()[-300:])
    c.check("commands run", 4, len(launch.get("commands", [])))
    c.check("losses equal the untraced run's, every step", len(ref["losses"]),
            sum(1 for x, y in zip(ref["losses"], job["losses"]) if x == y))
    c.check("final loss", ref["losses"][-1], job["losses"][-1])
    c.check("job stdout", launch.get("reference_stdout", ""), launch.get("job_stdout"))
    reference_stderr = set(launch.get("reference_stderr", "").splitlines())
    foreign = [l for l in launch.get("job_stderr", "").splitlines()
               if l and not l.startswith("memtrace:") and l not in reference_stderr]
    c.check("job stderr lines neither memtrace's nor the untraced run's", [], foreign[:3])
    traces = sorted(glob.glob(f"{a.dir}/traces/*.mtrace"), key=os.path.getmtime)
    c.check("trace files (one per attach)", 2, len(traces))
    busy_said = "memtrace: CUPTI already has a subscriber" in launch.get("job_stderr", "")
    for number, trace in enumerate(traces, 1):
        attach = check_trace(c, a.memtrace, trace, number, job["samples"], a.mode) or {}
        if a.mode == "injected":
            driver_layer = attach.get("driver_layer_attached", True)
            c.check(f"trace {number}: CUPTI busy said in one line exactly when the driver layer is off",
                    not driver_layer, busy_said)
            c.info(f"trace {number} driver layer", "on" if driver_layer else "off: CUPTI had another subscriber")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
