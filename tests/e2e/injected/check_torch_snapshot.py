"""The injected tracer's PyTorch snapshot (preload/attach/torch_snapshot.h) run in a real interpreter whose `torch` is
a stand-in (torch_snapshot_job.py has its segments; MiB = 1048576, KiB = 1024; layer 1 driver, 2 block; api 20
CU_MEM_ALLOC, 50 TORCH_ALLOCATOR, 23 CU_MEM_ALLOC_ASYNC, 0 unknown):
  native:  the 2 MiB segment (CU_MEM_ALLOC) and its one active_allocated block of 512 KiB at its start (the pending
           free and the inactive block are not live); the 4 MiB expandable segment on stream 5 (api unknown) and its
           3 MiB block; then device 0's baseline (device 1 has no context: skipped): free 70 MiB, total 80 MiB,
           allocated 512 KiB + 3 MiB = 3670016, reserved 6 MiB.
  mismatch: memory_allocated() says 1 KiB more: the same entries, and why says so.
  async:   cudaMallocAsync backend: one blocks_unknown entry of 3670016 bytes on device 0, and the baseline.
  async-racing: the first 3 readings of memory_allocated() each come with a pool event counted while the snippet
           ran (1 KiB more each time): the snapshot is taken 4 times and lists the 4th reading, 3670016 + 3 KiB.
  async-never-settles: every reading comes with an event: after 200 readings the last one is listed
           (3670016 + 199 KiB), and why says the figure may be off.
  uninitialized / no-torch: nothing listed, why says which.
"""
import json
import subprocess
import sys

import e2e_lib

MIB = e2e_lib.MIB


def add_arguments(parser):
    parser.add_argument("--injected", required=True, help="libmemtrace-injected-test.so")


case = e2e_lib.Case(add_arguments)


def run(state):
    env = case.env()
    env.pop("LD_PRELOAD")
    proc = subprocess.run([case.args.python, case.source("torch_snapshot_job.py"), case.args.injected, state], env=env,
                          capture_output=True, text=True, timeout=60)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"FAIL: torch_snapshot_job.py {state} exited with {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def live(layer, api, address, size, stream=0, unknown=0, expandable=0, device=0):
    return (f"live layer={layer} api={api} device={device} address={address} size={size} stream={stream} "
            f"unknown={unknown} expandable={expandable}")


baseline = f"device device=0 free={70 * MIB} total={80 * MIB} allocated=3670016 reserved={6 * MIB}"
native_lines = [
    live(1, 20, 0x10000000, 2 * MIB),
    live(2, 50, 0x10000000, 512 * 1024),
    live(1, 0, 0x20000000, 4 * MIB, stream=5, expandable=1),
    live(2, 50, 0x20000000, 3 * MIB, stream=5),
    baseline,
]

native = run("native")
case.check("native: complete", 1, native["complete"])
case.check("native: why", "", native["why"])
case.check("native: listed", native_lines, native["lines"])

mismatch = run("mismatch")
case.check("mismatch: complete", 0, mismatch["complete"])
case.check("mismatch: why", "device 0: the snapshot lists 3670016 bytes of blocks, memory_allocated() says 3671040",
           mismatch["why"])
case.check("mismatch: listed", native_lines[:4] + [baseline.replace("allocated=3670016", "allocated=3671040")],
           mismatch["lines"])

asynchronous = run("async")
case.check("async: complete", 0, asynchronous["complete"])
case.check("async: why", "the cudaMallocAsync backend lists no blocks: its allocated bytes are blocks_unknown",
           asynchronous["why"])
case.check("async: listed", [live(2, 23, 0, 3670016, unknown=1), baseline], asynchronous["lines"])

racing = run("async-racing")
settled = 3670016 + 3 * 1024
case.check("async racing: complete", 0, racing["complete"])
case.check("async racing: why", asynchronous["why"], racing["why"])
case.check("async racing: listed the 4th reading",
           [live(2, 23, 0, settled, unknown=1), baseline.replace("allocated=3670016", f"allocated={settled}")],
           racing["lines"])

never = run("async-never-settles")
last = 3670016 + 199 * 1024
case.check("async never settles: complete", 0, never["complete"])
case.check("async never settles: why",
           "allocations went on through each of 200 readings of memory_allocated(): the bytes allocated before attach "
           "may be off by what they moved", never["why"])
case.check("async never settles: listed the last reading",
           [live(2, 23, 0, last, unknown=1), baseline.replace("allocated=3670016", f"allocated={last}")],
           never["lines"])

uninitialized = run("uninitialized")
case.check("uninitialized: complete", 0, uninitialized["complete"])
case.check("uninitialized: why", "torch.cuda is not initialized in this process", uninitialized["why"])
case.check("uninitialized: listed", [], uninitialized["lines"])

no_torch = run("no-torch")
case.check("no torch: why", "torch is not imported in this process", no_torch["why"])
case.check("no torch: listed", [], no_torch["lines"])
case.finish()
