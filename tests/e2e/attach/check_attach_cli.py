"""`memtrace attach|detach|snapshot PID` on a Python job started without memtrace (attached_job.py, a stand-in
`torch` over the fake libc10_cuda.so): the CLI injects libmemtrace.so, the tracer's constructor takes the inject
request and serves the endpoint, and each attach turns on the fake CUPTI's callbacks and the c10 hook's GOT slot.

Every block is 2 MiB, one per 2 MiB segment at the same address. Before attach: alloc a, alloc b, free b
(allocated 2 MiB, reserved 4 MiB). Attach 1: its LiveAtAttach records are block a and segments a and b, exactly;
its AttachBaseline has the stand-in's free and total and the fake NVML's use (the two segments).
Then alloc c (b's cached block: a block event at b, no driver call), alloc d (a new segment: cuMemAlloc through the
fake CUPTI, then the block), free a (a block made before attach): the four events in that order; allocated 4 MiB,
reserved 6 MiB. Detach (TraceEnd DETACH). Untraced: free c. Snapshot: block d and segments a, b, d, TraceEnd
SNAPSHOT_DONE, no Event. Attach 2 (the tracer is already loaded: no second injection): free d, empty_cache (three
cuMemFree of segments made before attach, each with its size); the job exits while attached (TraceEnd EXIT).
The analyzer: no free of an unknown address in either trace, allocated and reserved at each trace's end as the
job's own totals said, attach numbers 1 and 2. The job's answers are the same as without memtrace.
"""
import json
import os
import subprocess
import sys

import e2e_lib
import trace_file as tf

MIB = 1 << 20
case = e2e_lib.Case(lambda parser: parser.add_argument("--nvml-dir", required=True))
out = case.args.out_dir
runtime_dir = os.path.join(out, "xdg")
os.makedirs(runtime_dir, mode=0o700)
L = tf.PROTO["Layer"]
DRIVER, BLOCK = L["LAYER_DRIVER"], L["LAYER_BLOCK"]
ORIGIN = tf.START_FIELDS["origin"]
ATTACH_NUMBER = tf.START_FIELDS["attach_number"]
O = tf.PROTO["TraceStart.Origin"]


def start_job():
    env = dict(os.environ, LD_LIBRARY_PATH=case.args.fake_lib_dir + ":" + case.args.nvml_dir, XDG_RUNTIME_DIR=runtime_dir,
               FAKECUDA_DEVICES="1", FAKECUDA_TOTAL_BYTES=str(1 << 30), MEMTRACE_QUIET="1")
    env.pop("LD_PRELOAD", None)
    env.pop("PYTHONPATH", None)
    proc = subprocess.Popen([case.args.python, case.source("attached_job.py")], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    case.check("the job started", "ready", proc.stdout.readline().split(" ")[0])
    return proc


def ask(proc, line):
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().split()


def memtrace(*argv):
    r = subprocess.run([case.args.memtrace, *argv], capture_output=True, text=True, timeout=120)
    return r.returncode, (r.stdout + r.stderr).strip()


def traced_path(text):
    """The trace named at the end of the CLI's line."""
    return text.rsplit(" ", 1)[-1]


proc = start_job()
pid = str(proc.pid)
a = int(ask(proc, "alloc a")[1])
b = int(ask(proc, "alloc b")[1])
ask(proc, "free b")
case.check("before attach: allocated, reserved", ["ok", str(2 * MIB), str(4 * MIB)], ask(proc, "stats"))

rc, line = memtrace("attach", "-o", os.path.join(out, "attach-%p.mtrace"), pid)
case.check("attach 1 exit", 0, rc)
case.check("attach 1 says", f"memtrace: attached to {pid}, tracing to", line.rsplit(" ", 1)[0])
first = traced_path(line)
c = int(ask(proc, "alloc c")[1])
case.check("c takes b's cached block", b, c)
d = int(ask(proc, "alloc d")[1])
ask(proc, "free a")
case.check("attached: allocated, reserved", ["ok", str(4 * MIB), str(6 * MIB)], ask(proc, "stats"))
rc, line = memtrace("detach", pid)
case.check("detach 1", (0, f"memtrace: detached from {pid}, wrote {first}"), (rc, line))

ask(proc, "free c")
rc, line = memtrace("snapshot", "-o", os.path.join(out, "snapshot-%p.mtrace"), pid)
case.check("snapshot exit", 0, rc)
snapshot = traced_path(line)
rc, line = memtrace("attach", "-o", os.path.join(out, "attach-%p.mtrace"), pid)
case.check("attach 2 exit", 0, rc)
second = traced_path(line)
ask(proc, "free d")
ask(proc, "empty_cache")
case.check("attach 2: allocated, reserved", ["ok", "0", "0"], ask(proc, "stats"))
proc.stdin.write("quit\n")
proc.stdin.flush()
stdout, stderr = proc.communicate(timeout=60)
case.check("job exit", 0, proc.returncode)
case.check("job stderr", "", stderr)


def live(trace):
    return sorted((e["layer"], e["address"], e["size"]) for e in trace.live_at_attach())


def events(trace):
    return [(e["kind"], e["layer"], e["address"], e["size"]) for e in trace.events(layers=True)
            if e["kind"] in (tf.ALLOC, tf.FREE)]


t1, ts, t2 = (tf.TraceFile(p) for p in (first, snapshot, second))
case.check("trace 1 origin, attach number", (O["ATTACH_INJECTED"], 1),
           (tf.first(t1.start(), ORIGIN, 0), tf.first(t1.start(), ATTACH_NUMBER, 0)))
case.check("trace 1 live at attach", sorted([(BLOCK, a, 2 * MIB), (DRIVER, a, 2 * MIB), (DRIVER, b, 2 * MIB)]),
           live(t1))
case.check("trace 1 events", [(tf.ALLOC, BLOCK, b, 2 * MIB), (tf.ALLOC, DRIVER, d, 2 * MIB),
                              (tf.ALLOC, BLOCK, d, 2 * MIB), (tf.FREE, BLOCK, a, 2 * MIB)], events(t1))
case.check("trace 1 end", "DETACH", (t1.end() or {}).get("how"))
# The AttachBaseline: free and total as the stand-in torch.cuda.mem_get_info() said them, this process's use as the
# fake NVML lists it (the fake driver's live device memory: the two 2 MiB segments).
f = tf.BASELINE_FIELDS
case.check("trace 1 baseline: device, free, total, process use", [(0, 1 << 29, 1 << 30, 4 * MIB)],
           [(tf.zigzag(tf.first(b, f["device"], 0)), tf.first(b, f["device_free_bytes"], 0),
             tf.first(b, f["device_total_bytes"], 0), tf.first(b, f["process_used_bytes"]))
            for b in t1.of_kind(tf.ATTACH_BASELINE)])
case.check("snapshot origin", O["SNAPSHOT"], tf.first(ts.start(), ORIGIN, 0))
case.check("snapshot live set", sorted([(BLOCK, d, 2 * MIB), (DRIVER, a, 2 * MIB), (DRIVER, b, 2 * MIB),
                                        (DRIVER, d, 2 * MIB)]), live(ts))
case.check("snapshot events", [], events(ts))
case.check("snapshot end", "SNAPSHOT_DONE", (ts.end() or {}).get("how"))
case.check("trace 2 origin, attach number", (O["ATTACH_INJECTED"], 2),
           (tf.first(t2.start(), ORIGIN, 0), tf.first(t2.start(), ATTACH_NUMBER, 0)))
case.check("trace 2 live at attach", live(ts), live(t2))
case.check("trace 2 events", [(tf.FREE, BLOCK, d, 2 * MIB)] + sorted(
    [(tf.FREE, DRIVER, s, 2 * MIB) for s in (a, b, d)]), events(t2)[:1] + sorted(events(t2)[1:]))
case.check("trace 2 end", "EXIT", (t2.end() or {}).get("how"))

for label, path, allocated, reserved in (("trace 1", first, 4 * MIB, 6 * MIB), ("trace 2", second, 0, 0)):
    summary = case.analyze("summary", path)
    case.check(f"{label} frees of unknown addresses", 0, summary["trace"]["unknown_frees"])
    case.check(f"{label} disagreement with PyTorch's allocated", None, summary["trace"].get("allocated_vs_pytorch"))
    rows = json.loads(subprocess.run([case.args.memtrace, "timeline", path, "--json"], capture_output=True,
                                     text=True, timeout=60).stdout)["rows"]
    case.check(f"{label} allocated, reserved at the end", (allocated, reserved),
               (rows[-1]["allocated_bytes"], rows[-1]["reserved_bytes"]) if rows else None)
case.finish()
