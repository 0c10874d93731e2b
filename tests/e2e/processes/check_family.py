"""Many processes, one summary: a parent, a forked child, a posix_spawned child and a forked child that execs
(two traces of one pid), read together by `memtrace summary OUT --json`; its `processes` list compared exactly.

e2e_family (MiB = 1048576 bytes; each child ends before the next starts, so the traces start in this order):
  parent P:   device 0: alloc 4 MiB, [children], alloc 2 MiB, free 2 MiB -> peak 6 MiB, final 4 MiB
  child 1:    device 0: alloc 8 MiB, alloc 16 MiB, free 8 MiB           -> peak 24 MiB, final 16 MiB
  spawned:    device 1: alloc 6 MiB, free it, alloc 2 MiB               -> peak 6 MiB, final 2 MiB
  child 3:    device 0: alloc 1 MiB, then execv                          -> peak 1 MiB, final 1 MiB
  its execd image (same pid, same parent): device 0: alloc 3 MiB         -> peak 3 MiB, final 3 MiB;
              device 1: alloc 5 MiB, free it                             -> peak 5 MiB, final 0
Plain cudaMalloc, no allocator layer: allocated and reserved are the driver's bytes. Every process is on this
host; sorted by host, then start time, then pid: P, child 1, spawned, child 3, execd. P's parent is this checker
(ppid its pid, not traced: no parent index); every other process's ppid is P, its parent index 0 (the exec'd image
keeps its pid and its parent: it is P's child, not child 3's). The fake CUDA's GPUs: device N is
"GPU-66616b65-6375-6461-7575-6964" followed by N as 8 hex digits ("fakecudauuid" and N big-endian).
"""
import os
import re
import socket

import e2e_lib
import faults_lib
import processes_json
from e2e_lib import MIB


def gpu(ordinal):
    return "GPU-66616b65-6375-6461-7575-6964%08x" % ordinal


def device(ordinal, peak_mib, final_mib):
    return {ordinal: {"gpu": gpu(ordinal), "peak_allocated_bytes": peak_mib * MIB,
                      "peak_reserved_bytes": peak_mib * MIB, "final_allocated_bytes": final_mib * MIB,
                      "final_reserved_bytes": final_mib * MIB}}


case = e2e_lib.Case()
proc, outcome = faults_lib.run([case.program("family")], faults_lib.traced_env(case), timeout=60)
faults_lib.echo(outcome, "e2e_family")
case.check("exit status", 0, outcome.exit_status)
pids = {name: int(pid) for name, pid in re.findall(r"^(child1|spawned|child3) (\d+)$", outcome.stdout, re.M)}
parent = proc.pid
child1, spawned, child3 = (pids.get(name, -1) for name in ("child1", "spawned", "child3"))
out = case.args.out_dir
case.check("trace files", sorted([f"trace-{pid}.mtrace" for pid in (parent, child1, spawned, child3)] +
                                [f"trace-{child3}.1.mtrace"]), sorted(os.listdir(out)))

host = socket.gethostname()
expected = [
    {"pid": parent, "ppid": os.getpid(), "host": host, "parent": None, "devices": device(0, 6, 4)},
    {"pid": child1, "ppid": parent, "host": host, "parent": 0, "devices": device(0, 24, 16)},
    {"pid": spawned, "ppid": parent, "host": host, "parent": 0, "devices": device(1, 6, 2)},
    {"pid": child3, "ppid": parent, "host": host, "parent": 0, "devices": device(0, 1, 1)},
    {"pid": child3, "ppid": parent, "host": host, "parent": 0, "devices": {**device(0, 3, 3), **device(1, 5, 0)}},
]
processes_json.check_processes(case, processes_json.summary_of_many(case, out), expected)
case.finish()
