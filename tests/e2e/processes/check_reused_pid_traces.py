"""A reused pid, in traces written by hand (reused_pid_traces.cc, with tests/analyzer/trace_builder.h): a process
is the parent of another only when it is on the same host, its pid is the child's ppid, and it was alive when the
child started. `memtrace summary DIR --json`'s `processes` list compared exactly.

Times in ms after T0 = 1,800,000,000 s (unix ns 1.8e18); MiB = 1048576 bytes.
  file  host   pid  ppid  lives      device: figures
  a     hostA  100  1     0 - 2      0: alloc 10 MiB at 0, freed at 1   -> peak 10 MiB at 0, final 0
  b     hostA  200  100   0.5 - 1.5  0: alloc 3 MiB at 0.5              -> peak 3 MiB at 0.5, final 3 MiB
  c     hostA  400  100   5 - 6      0: alloc 1 MiB at 5                -> peak 1 MiB at 5, final 1 MiB
  d     hostA  100  1     10 - 12    1: alloc 7 MiB at 10, 1 MiB at 11  -> peak 8 MiB at 11, final 8 MiB
  e     hostA  300  100   11 - 11.5  1: alloc 2 MiB at 11               -> peak 2 MiB at 11, final 2 MiB
  f     hostB  200  100   0.5 - 1    0: alloc 4 MiB at 0.5              -> peak 4 MiB at 0.5, final 4 MiB
Sorted by host, then start time, then pid: a, b, c, d, e, f (indices 0 to 5). Parents:
  a: none (pid 1 not traced); b: 0 (a, pid 100, alive at 0.5); c: none (pid 100 dead at 5: a ended at 2, d not
  started); d: none; e: 3 (d, the pid's second life, alive at 11; not a); f: none (pid 100 is on hostA only).
GPUs: "GPU-" and the UUID's bytes in hex: 15 of the host's letter ('A' 0x41, 'B' 0x42), then the ordinal.
Plain cudaMalloc, no allocator layer: reserved is the driver's bytes, as allocated.
"""
import subprocess

import e2e_lib
import processes_json
from e2e_lib import MIB

T0 = 1_800_000_000 * 10**9
MS = 10**6


def gpu(letter, ordinal):
    hex_bytes = ("%02x" % ord(letter)) * 15 + "%02x" % ordinal
    return "GPU-%s-%s-%s-%s-%s" % (hex_bytes[:8], hex_bytes[8:12], hex_bytes[12:16], hex_bytes[16:20], hex_bytes[20:])


def device(letter, ordinal, peak_mib, peak_at_ms, final_mib):
    return {ordinal: {"gpu": gpu(letter, ordinal), "peak_allocated_bytes": peak_mib * MIB,
                      "peak_allocated_unix_ns": T0 + int(peak_at_ms * MS), "peak_reserved_bytes": peak_mib * MIB,
                      "final_allocated_bytes": final_mib * MIB, "final_reserved_bytes": final_mib * MIB}}


case = e2e_lib.Case()
out = case.args.out_dir
subprocess.run([case.program("reused_pid_traces"), out], check=True, timeout=60)
expected = [
    {"pid": 100, "ppid": 1, "host": "hostA", "parent": None, "devices": device("A", 0, 10, 0, 0)},
    {"pid": 200, "ppid": 100, "host": "hostA", "parent": 0, "devices": device("A", 0, 3, 0.5, 3)},
    {"pid": 400, "ppid": 100, "host": "hostA", "parent": None, "devices": device("A", 0, 1, 5, 1)},
    {"pid": 100, "ppid": 1, "host": "hostA", "parent": None, "devices": device("A", 1, 8, 11, 8)},
    {"pid": 300, "ppid": 100, "host": "hostA", "parent": 3, "devices": device("A", 1, 2, 11, 2)},
    {"pid": 200, "ppid": 100, "host": "hostB", "parent": None, "devices": device("B", 0, 4, 0.5, 4)},
]
processes_json.check_processes(case, processes_json.summary_of_many(case, out), expected)
case.finish()
