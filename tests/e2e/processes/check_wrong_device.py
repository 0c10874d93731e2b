"""Two ranks of one job on two devices, rank 1's first allocation on device 0 (torch.cuda.set_device forgotten):
`memtrace summary DIR` names rank 1 as WRONG DEVICE with the line that allocated there.

e2e_rank_devices, run once per rank with RANK = LOCAL_RANK = r and WORLD_SIZE = 2 (MiB = 1048576 bytes; plain
cudaMalloc, so allocated = reserved = the driver's bytes):
  rank 0: device 0: stray 2 MiB (device 0 is its own), then 8 MiB -> peak 10 MiB; both freed -> final 0
  rank 1: device 0: stray 2 MiB -> peak 2 MiB, freed -> final 0;  device 1: 8 MiB -> peak 8 MiB, final 0
Rank 1's local device is 1 (the ordinal equal to LOCAL_RANK, which it used), so its 2 MiB on device 0 is a wrong
device, first at the stray line; rank 0 is on its own device. Ranks: rank 0 peaks at 10 MiB on device 0, rank 1 at
8 MiB on device 1: worst rank 0, spread 2 MiB. GPU 0 is used by both, GPU 1 by rank 1. The fake CUDA's GPUs: device
N is "GPU-66616b65-6375-6461-7575-6964" followed by N as 8 hex digits.
"""
import os
import socket
import subprocess

import e2e_lib
import processes_json
from e2e_lib import MIB


def gpu(ordinal):
    return "GPU-66616b65-6375-6461-7575-6964%08x" % ordinal


case = e2e_lib.Case()
out = case.args.out_dir
for rank in (0, 1):
    env = case.env({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2"})
    proc = subprocess.run([case.program("rank_devices")], env=env, capture_output=True, text=True, timeout=60)
    case.check(f"rank {rank} exit status", 0, proc.returncode)
traces = sorted(os.listdir(out))
case.check("trace files", 2, len(traces))

document = processes_json.summary_of_many(case, out)
processes = document.get("processes", [])
ranks = [p.get("rank") for p in processes]
case.check("processes by rank, in start order", [0, 1], ranks)
host = socket.gethostname()
stray_line = e2e_lib.marker_line(case.source("rank_devices.cc"), "the stray line")
site = f"rank_devices.cc:{stray_line} stray_allocation()"
rank1 = processes[1] if len(processes) == 2 else {}
expected = [{"pid": processes[0].get("pid") if processes else None, "ppid": os.getpid(), "host": host,
             "parent": None, "devices": {0: {"gpu": gpu(0), "peak_allocated_bytes": 10 * MIB,
                                             "peak_reserved_bytes": 10 * MIB, "final_allocated_bytes": 0}}},
            {"pid": rank1.get("pid"), "ppid": os.getpid(), "host": host, "parent": None,
             "devices": {0: {"gpu": gpu(0), "peak_allocated_bytes": 2 * MIB, "final_allocated_bytes": 0},
                         1: {"gpu": gpu(1), "peak_allocated_bytes": 8 * MIB, "final_allocated_bytes": 0}}}]
processes_json.check_processes(case, document, expected)

wrong = document.get("wrong_devices", [])
case.check("wrong devices: (process, ordinal, gpu, local ordinal, peak allocated, site)",
           [(1, 0, gpu(0), 1, 2 * MIB, site)],
           [(w.get("process"), w.get("ordinal"), w.get("gpu"), w.get("local_ordinal"), w.get("peak_allocated_bytes"),
             w.get("first_allocation_site")) for w in wrong])
table = document.get("ranks") or {}
case.check("rank rows: (rank, process, ordinal, peak allocated)", [(0, 0, 0, 10 * MIB), (1, 1, 1, 8 * MIB)],
           [(r.get("rank"), r.get("process"), r.get("ordinal"), (r.get("peak_allocated") or {}).get("bytes"))
            for r in table.get("rows", [])])
case.check("worst rank", 0, table.get("worst_rank"))
case.check("peak allocated spread", 2 * MIB, table.get("peak_allocated_spread_bytes"))
case.check("GPUs: (gpu, users)", [(gpu(0), [0, 1]), (gpu(1), [1])],
           [(g.get("gpu"), [u.get("process") for u in g.get("processes", [])]) for g in document.get("gpus", [])])

text = subprocess.run([case.args.memtrace, "summary", out], capture_output=True, text=True, timeout=60).stdout
line = next((l for l in text.splitlines() if l.startswith("WRONG DEVICE")), "")
want = (f"WRONG DEVICE: rank 1 (pid {rank1.get('pid')}) allocated 2.00 MiB on GPU 0 ({gpu(0)}), not its local "
        f"device 1: first at {site}")
case.check("the WRONG DEVICE line (up to its time)", want, line[:len(want)])
case.finish()
