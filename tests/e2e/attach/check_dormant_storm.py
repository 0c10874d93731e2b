"""MEMTRACE_START=dormant under a 16-thread allocation storm (e2e_storm), driven through the control socket.

While the storm runs: the dormant process has written no file; `status` says "ok dormant -"; then three times
`attach PATH` (ok PATH), `status` (ok running PATH), `detach` (ok PATH). Each of the three traces: TraceStart
origin ATTACH_DORMANT with attach_number 1, 2, 3; every LiveAtAttach before the first Event; one TraceEnd, DETACH,
nothing dropped; replaying the trace from its LiveAtAttach records, every FREE frees a live (layer, address) (nothing
lost across the switch) and no ALLOC lands on a live one (nothing counted twice).
At a quiescent point (the program printed its live set): `snapshot PATH` writes a trace of origin SNAPSHOT whose
LiveAtAttach records are exactly the program's: its 64 blocks (LAYER_BLOCK, 8 per odd thread), its 64 cudaMalloc
allocations (LAYER_DRIVER), and driver-layer segments of the fake caching allocator adding up to its reserved
bytes; one AttachBaseline, device 0, with the fake NVML's figures (total 1 GiB, this process using the cudaMalloc
bytes plus the reserved bytes, free the rest); TraceEnd SNAPSHOT_DONE, no Event.
Permissions: a peer whose effective uid is 65534 (reaching the socket with fsuid 0) is answered "error not your
process"; with uid 65534 throughout, the 0700 directory refuses the connection. A second process whose endpoint
directory is group/other-writable says so in one line and makes no socket. After "exit" the socket is gone.
"""
import ctypes
import os
import subprocess
import sys
import time

import e2e_lib
import faults_lib
import trace_file as tf

ATTACHES = 3
NOBODY = 65534
ORIGIN = tf.START_FIELDS["origin"]
ATTACH_NUMBER = tf.START_FIELDS["attach_number"]
ATTACH_DORMANT, SNAPSHOT = (tf.PROTO["TraceStart.Origin"][name] for name in ("ATTACH_DORMANT", "SNAPSHOT"))
LAYER_DRIVER, LAYER_BLOCK = (tf.PROTO["Layer"][name] for name in ("LAYER_DRIVER", "LAYER_BLOCK"))

case = e2e_lib.Case(lambda parser: parser.add_argument("--nvml-dir", required=True))
out = case.args.out_dir
runtime_dir = os.path.join(out, "xdg")
os.makedirs(runtime_dir, mode=0o700)


def start_storm(runtime):
    env = faults_lib.traced_env(case, {"MEMTRACE_START": "dormant", "XDG_RUNTIME_DIR": runtime,
                                       "MEMTRACE_OUTPUT": os.path.join(out, "never-%p.mtrace")})
    env["LD_LIBRARY_PATH"] = case.args.fake_lib_dir + ":" + case.args.nvml_dir
    proc = subprocess.Popen([case.program("storm")], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    case.check("the storm started", "storming", proc.stdout.readline().strip())
    return proc


def request(path, line):
    """A control request; 60 s, as the storm's 16 threads load the machine."""
    return e2e_lib.control_request(path, line, timeout_s=60)


def replay(trace, label):
    """Replays `trace` from its LiveAtAttach records; checks what the module docstring says per trace."""
    kinds = [kind for kind, _ in trace.records]
    first_event = kinds.index(tf.EVENT) if tf.EVENT in kinds else len(kinds)
    last_live = max([i for i, kind in enumerate(kinds) if kind == tf.LIVE_AT_ATTACH], default=-1)
    case.check(f"{label}: LiveAtAttach records before the first Event", True, last_live < first_event)
    live = {}
    for entry in trace.live_at_attach():
        live[(entry["layer"], entry["address"])] = entry["size"]
    case.check(f"{label}: LiveAtAttach keys distinct", len(trace.live_at_attach()), len(live))
    lost = double = 0
    events = trace.events(layers=True)
    for e in events:
        key = (e["layer"], e["address"])
        if e["kind"] == tf.ALLOC:
            double += key in live
            live[key] = e["size"]
        elif e["kind"] == tf.FREE:
            lost += key not in live
            live.pop(key, None)
    case.check(f"{label}: frees of nothing live (lost)", 0, lost)
    case.check(f"{label}: allocations on a live address (double)", 0, double)
    return events


def storm_traces(proc, sock):
    case.check("no file while dormant", [], sorted(f for f in os.listdir(out) if f.endswith(".mtrace")))
    case.check("status while dormant", "ok dormant -", request(sock, "status"))
    for n in range(1, ATTACHES + 1):
        path = os.path.join(out, f"attach-{n}.mtrace")
        case.check(f"attach {n}", f"ok {path}", request(sock, f"attach {path}"))
        time.sleep(0.3)
        case.check(f"status attached {n}", f"ok running {path}", request(sock, "status"))
        case.check(f"detach {n}", f"ok {path}", request(sock, "detach"))
        trace = tf.TraceFile(path)
        case.check(f"trace {n} complete", True, trace.complete)
        case.check(f"trace {n} origin", ATTACH_DORMANT, tf.first(trace.start(), ORIGIN, 0))
        case.check(f"trace {n} attach_number", n, tf.first(trace.start(), ATTACH_NUMBER, 0))
        ends = trace.ends()
        case.check(f"trace {n} TraceEnd", [("DETACH", 0)], [(e["how"], e["dropped_events"]) for e in ends])
        events = replay(trace, f"trace {n}")
        case.check(f"trace {n} has events of the storm", True, len(events) > 1000)
        case.check(f"trace {n} TraceEnd.events", len(events), ends[0]["events"] if ends else None)
        time.sleep(0.1)


def snapshot_matches_program(proc, sock):
    proc.stdin.write("quiesce\n")
    proc.stdin.flush()
    blocks, cuda, reserved = {}, {}, None
    for line in iter(proc.stdout.readline, ""):
        words = line.split()
        if words == ["quiet"]:
            break
        if words[0] == "live":
            (blocks if words[1] == "block" else cuda)[int(words[2])] = int(words[3])
        elif words[0] == "reserved":
            reserved = int(words[1])
    case.check("program's live blocks", 64, len(blocks))
    case.check("program's live cudaMalloc allocations", 64, len(cuda))
    path = os.path.join(out, "snapshot.mtrace")
    case.check("snapshot", f"ok {path}", request(sock, f"snapshot {path}"))
    trace = tf.TraceFile(path)
    case.check("snapshot origin", SNAPSHOT, tf.first(trace.start(), ORIGIN, 0))
    case.check("snapshot TraceEnd", ["SNAPSHOT_DONE"], [e["how"] for e in trace.ends()])
    case.check("snapshot events", 0, len(trace.events()))
    live = trace.live_at_attach()
    case.check("snapshot blocks = the program's",
               blocks, {e["address"]: e["size"] for e in live if e["layer"] == LAYER_BLOCK})
    driver = {e["address"]: e["size"] for e in live if e["layer"] == LAYER_DRIVER}
    case.check("snapshot cudaMalloc allocations = the program's", cuda,
               {address: size for address, size in driver.items() if address in cuda})
    case.check("snapshot segments = the allocator's reserved bytes", reserved,
               sum(size for address, size in driver.items() if address not in cuda))
    case.check("snapshot has nothing else", len(blocks) + len(driver), len(live))
    # The fake NVML (tests/fakecuda/nvml.cc): this process uses what the fake driver charged to the device, the
    # program's cudaMalloc allocations and the allocator's segments; nothing else is on it.
    used = sum(cuda.values()) + reserved
    f = tf.BASELINE_FIELDS
    baselines = [(tf.zigzag(tf.first(b, f["device"], 0)), tf.first(b, f["device_total_bytes"], 0),
                  tf.first(b, f["device_free_bytes"], 0), tf.first(b, f["process_used_bytes"]))
                 for b in trace.of_kind(tf.ATTACH_BASELINE)]
    case.check("snapshot AttachBaseline (device, total, free, process used)",
               [(0, 1 << 30, (1 << 30) - used, used)], baselines)
    case.check("still dormant after the snapshot", "ok dormant -", request(sock, "status"))


def peer_of_another_uid(sock):
    """The answer to a peer of effective uid 65534 that reaches the socket (fsuid 0), and whether one with uid
    65534 throughout is refused at connect; from forked children, since the uid is per process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(0, NOBODY, 0)
            ctypes.CDLL(None).setfsuid(0)
            answer = request(sock, "status")
        except OSError as e:
            answer = f"OSError {e.errno}"
        os.write(write_end, answer.encode())
        os._exit(0)
    os.waitpid(pid, 0)
    answer = os.read(read_end, 1000).decode()
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(NOBODY, NOBODY, NOBODY)
            refused = "connected"
            request(sock, "status")
        except PermissionError:
            refused = "refused"
        except OSError as e:
            refused = f"OSError {e.errno}"
        os.write(write_end, refused.encode())
        os._exit(0)
    os.waitpid(pid, 0)
    refused = os.read(read_end, 1000).decode()
    return answer, refused


proc = start_storm(runtime_dir)
sock = os.path.join(runtime_dir, "memtrace", f"{proc.pid}.sock")
case.check("the endpoint appeared", True, e2e_lib.wait_for_file(sock))
case.check("socket mode", 0o600, os.stat(sock).st_mode & 0o777)
case.check("endpoint directory mode", 0o700, os.stat(os.path.dirname(sock)).st_mode & 0o777)
storm_traces(proc, sock)
snapshot_matches_program(proc, sock)
answer, refused = peer_of_another_uid(sock)
case.check("a peer of another uid", "error not your process", answer)
case.check("uid 65534 throughout", "refused", refused)
proc.stdin.write("exit\n")
proc.stdin.flush()
stdout, stderr = proc.communicate(timeout=60)
sys.stderr.write(stderr)
case.check("storm exit status", 0, proc.returncode)
case.check("the socket is removed at exit", False, os.path.exists(sock))

# A group/other-writable endpoint directory: refused, no socket.
loose_runtime = os.path.join(out, "loose")
os.makedirs(os.path.join(loose_runtime, "memtrace"))
os.chmod(loose_runtime, 0o700)
os.chmod(os.path.join(loose_runtime, "memtrace"), 0o777)
proc = start_storm(loose_runtime)
time.sleep(0.2)
loose_sock = os.path.join(loose_runtime, "memtrace", f"{proc.pid}.sock")
case.check("no socket in a loose directory", False, os.path.exists(loose_sock))
proc.stdin.write("exit\n")
proc.stdin.flush()
stdout, stderr = proc.communicate(timeout=60)
lines = faults_lib.memtrace_lines(stderr)
case.check("the loose directory's line", [
    f"memtrace: the control directory {loose_runtime}/memtrace is not a directory of uid 0 that only it can write; "
    "no attach endpoint"], lines)
case.check("loose storm exit status", 0, proc.returncode)
case.finish()
