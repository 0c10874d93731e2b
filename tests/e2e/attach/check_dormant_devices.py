"""The device of each dormant allocation, resolved when the live set is read (e2e_dormant_devices).

A dormant hook notes a plain device allocation (cudaMalloc, cuMemAlloc, cuMemAllocPitch) without its device and
context; the live set asks the driver for both at a snapshot or attach, and at a context's destroy. The program's
allocations: cudaMalloc 1 MiB on device 0 (its first CUDA call, the dormant start, which looks them up itself),
then dormant: cudaMalloc 2 MiB and cudaMallocAsync 256 KiB (a pool block) on device 1, cuMemAlloc 3 MiB and cuMemAllocPitch 102,400 bytes in a context of its
own on device 1, and cuMemAlloc 5 MiB in a second context of its own on device 0, which it destroys.
The snapshot's LiveAtAttach records are exactly the five live ones, each with its API and device (not the 5 MiB of
the destroyed context: the destroy found its context), and an AttachBaseline for devices 0 and 1; the attach that
follows opens with the same records; after its detach, a second snapshot lists them again.
"""
import os
import subprocess

import e2e_lib
import faults_lib
import trace_file as tf

case = e2e_lib.Case()
out = case.args.out_dir
runtime = os.path.join(out, "xdg")
os.makedirs(runtime, mode=0o700)
LAYER_DRIVER, LAYER_BLOCK = (tf.PROTO["Layer"][name] for name in ("LAYER_DRIVER", "LAYER_BLOCK"))
API = tf.PROTO["Api"]


request = e2e_lib.control_request
wait_for = e2e_lib.wait_for_file


def listed(trace):
    """(layer, api, device, address, size) of each LiveAtAttach, sorted."""
    return sorted((e["layer"], e["api"], e["device"], e["address"], e["size"]) for e in trace.live_at_attach())


def baseline_devices(trace):
    return sorted(tf.zigzag(tf.first(b, tf.BASELINE_FIELDS["device"], 0)) for b in trace.of_kind(tf.ATTACH_BASELINE))


env = faults_lib.traced_env(case, {"MEMTRACE_START": "dormant", "XDG_RUNTIME_DIR": runtime})
proc = subprocess.Popen([case.program("dormant_devices")], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
expected = []
for line in iter(proc.stdout.readline, ""):
    words = line.split()
    if words == ["ready"]:
        break
    _, api, device, address, size = words
    layer = LAYER_BLOCK if api == "cudaMallocAsync" else LAYER_DRIVER
    api_number = API[{"cudaMalloc": "CUDA_MALLOC", "cudaMallocAsync": "CUDA_MALLOC_ASYNC", "cuMemAlloc": "CU_MEM_ALLOC",
                      "cuMemAllocPitch": "CU_MEM_ALLOC_PITCH"}[api]]
    expected.append((layer, api_number, int(device), int(address), int(size)))
expected.sort()
case.check("the program's live allocations", 5, len(expected))
sock = os.path.join(runtime, "memtrace", f"{proc.pid}.sock")
case.check("the endpoint", True, wait_for(sock))

first = os.path.join(out, "snapshot-1.mtrace")
case.check("snapshot: reply", f"ok {first}", request(sock, f"snapshot {first}"))
case.check("snapshot: LiveAtAttach (layer, api, device, address, size)", expected, listed(tf.TraceFile(first)))
case.check("snapshot: AttachBaseline devices", [0, 1], baseline_devices(tf.TraceFile(first)))

attached = os.path.join(out, "attached.mtrace")
case.check("attach: reply", f"ok {attached}", request(sock, f"attach {attached}"))
case.check("detach: reply", f"ok {attached}", request(sock, "detach"))
case.check("attach: LiveAtAttach (layer, api, device, address, size)", expected, listed(tf.TraceFile(attached)))
case.check("attach: AttachBaseline devices", [0, 1], baseline_devices(tf.TraceFile(attached)))

second = os.path.join(out, "snapshot-2.mtrace")
case.check("snapshot after the detach: reply", f"ok {second}", request(sock, f"snapshot {second}"))
case.check("snapshot after the detach: LiveAtAttach", expected, listed(tf.TraceFile(second)))

proc.communicate("exit\n", timeout=30)
case.check("exit status", 0, proc.returncode)
case.finish()
