"""`memtrace attach PID` on a Python job whose stand-in `torch` is PyTorch's cudaMallocAsync backend
(attached_job.py cudaMallocAsync): no block is listed one by one, so what was allocated before attach is one
blocks_unknown entry worked out from memory_allocated() (the pool's used bytes) and the attach window's events.

Before attach: alloc x (1 MiB), alloc y (3 MiB): allocated 4 MiB. `race z 8MiB y` arms the job's memory_allocated()
to allocate z (8 MiB) and free y first: the tracer's snapshot reads it with the window open, so those two events are
in the trace and already in the total read (12 MiB - 3 MiB = 9 MiB). The snapshot sees the pool events move while it
ran and reads again: 9 MiB, with the window's pool events at +8 MiB - 3 MiB = 5 MiB. The window freed y, made before
attach, which the baseline lists with its address (3 MiB). So the bytes not listed one by one are
9 - 5 - 3 = 1 MiB (x), and the trace starts at 1 + 3 = 4 MiB, as the job had.
Then alloc w (2 MiB), free x (made before attach: the free's size comes from the driver at the call, and the
blocks_unknown bytes absorb it), sync: allocated 9 + 2 - 1 = 10 MiB. Detach.
Then a second job without a tracer gets four `memtrace attach` at once: exactly one injects and attaches, the others
wait for it and are refused in one line; SIGTERM while attached ends the trace with the signal and removes the
endpoint.
The analyzer: allocated 4 MiB at time 0 in the timeline, the job's allocated and reserved at its last, no free
of an unknown address.
"""
import json
import os
import subprocess

import e2e_lib
import trace_file as tf

MIB = 1 << 20
case = e2e_lib.Case(lambda parser: parser.add_argument("--nvml-dir", required=True))
out = case.args.out_dir
runtime_dir = os.path.join(out, "xdg")
os.makedirs(runtime_dir, mode=0o700)
BLOCK = tf.PROTO["Layer"]["LAYER_BLOCK"]
ASYNC = tf.PROTO["Api"]["CU_MEM_ALLOC_ASYNC"]

env = dict(os.environ, LD_LIBRARY_PATH=case.args.fake_lib_dir + ":" + case.args.nvml_dir, XDG_RUNTIME_DIR=runtime_dir,
           FAKECUDA_DEVICES="1", FAKECUDA_TOTAL_BYTES=str(1 << 30), MEMTRACE_QUIET="1")
env.pop("LD_PRELOAD", None)
env.pop("PYTHONPATH", None)


def start_job():
    job = subprocess.Popen([case.args.python, case.source("attached_job.py"), "cudaMallocAsync"], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    case.check("the job started", "ready", job.stdout.readline().split(" ")[0])
    return job


proc = start_job()


def ask(line):
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().split()


ask(f"alloc x {MIB}")
y = int(ask(f"alloc y {3 * MIB}")[1])
case.check("before attach: allocated", str(4 * MIB), ask("stats")[1])
ask(f"race z {8 * MIB} y")

r = subprocess.run([case.args.memtrace, "attach", "-o", os.path.join(out, "attach-%p.mtrace"), str(proc.pid)],
                   capture_output=True, text=True, timeout=120)
case.check("attach exit", 0, r.returncode)
path = (r.stdout + r.stderr).strip().rsplit(" ", 1)[-1]
ask(f"alloc w {2 * MIB}")
ask("free x")
ask("sync")
job = ask("stats")
case.check("attached: allocated", str(10 * MIB), job[1])
r = subprocess.run([case.args.memtrace, "detach", str(proc.pid)], capture_output=True, text=True, timeout=120)
case.check("detach exit", 0, r.returncode)
proc.stdin.write("quit\n")
proc.stdin.flush()
_, stderr = proc.communicate(timeout=60)
case.check("job exit", 0, proc.returncode)
case.check("job stderr", "", stderr)

# A second job, without a tracer: four attaches at once. One loads the tracer and attaches; the others wait for it
# (the inject lock) and are refused in one line.
proc = start_job()
ask(f"alloc v {MIB}")
attaches = [subprocess.Popen([case.args.memtrace, "attach", "-o", os.path.join(out, "again-%p.mtrace"), str(proc.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(4)]
answers = sorted((a.wait(timeout=120), a.stdout.read().strip().split(",")[0]) for a in attaches)
case.check("four attaches at once: one attached, three refused",
           [(0, f"memtrace: attached to {proc.pid}")] + [(1, f"memtrace: cannot attach to {proc.pid}: already attached")]
           * 3, [(rc, text) for rc, text in answers])
again = [p for p in os.listdir(out) if p.startswith("again-")]
# SIGTERM while attached: the trace ends with the signal, and the endpoint goes with the process.
proc.terminate()
_, stderr = proc.communicate(timeout=60)
case.check("job killed by SIGTERM", -15, proc.returncode)
case.check("job stderr", "", stderr)
case.check("the endpoint is removed", [], [p for p in os.listdir(os.path.join(runtime_dir, "memtrace"))
                                           if p.endswith(".sock")])
ended = tf.TraceFile(os.path.join(out, again[0])) if len(again) == 1 else None
case.check("the trace of the attach that won ends with SIGTERM", ("SIGNAL", 15),
           ((ended.end() or {}).get("how"), (ended.end() or {}).get("signal")) if ended else again)

trace = tf.TraceFile(path)
case.check("live at attach: the bytes not listed one by one (x), and y, freed in the window",
           sorted([(BLOCK, ASYNC, 0, MIB), (BLOCK, ASYNC, y, 3 * MIB)]),
           sorted((e["layer"], e["api"], e["address"], e["size"]) for e in trace.live_at_attach()))
events = [(e["kind"], e["layer"], e["size"]) for e in trace.events(layers=True) if e["kind"] in (tf.ALLOC, tf.FREE)]
case.check("events: z, y's free, w, x's free (each free with its size)",
           [(tf.ALLOC, BLOCK, 8 * MIB), (tf.FREE, BLOCK, 3 * MIB), (tf.ALLOC, BLOCK, 2 * MIB),
            (tf.FREE, BLOCK, MIB)], events)
summary = case.analyze("summary", path)
case.check("frees of unknown addresses", 0, summary["trace"]["unknown_frees"])
rows = json.loads(subprocess.run([case.args.memtrace, "timeline", path, "--json"], capture_output=True, text=True,
                                 timeout=60).stdout)["rows"]
case.check("allocated at time 0, once every record of the attach is applied", 4 * MIB,
           [r for r in rows if r["time_s"] == 0][-1]["allocated_bytes"])
case.check("allocated, reserved at the last row", (10 * MIB, int(job[2])),
           (rows[-1]["allocated_bytes"], rows[-1]["reserved_bytes"]))
case.finish()
