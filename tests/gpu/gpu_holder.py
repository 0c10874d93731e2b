"""Holds most of GPU 0 for another process's OOM, for scripts/gpu-check (not traced).

    python3 gpu_holder.py READY_JSON LEAVE_FREE_BYTES

Allocates one block of (free memory - LEAVE_FREE_BYTES), rounded down to 2 MiB, writes READY_JSON
({"pid", "held_bytes", "device_free_bytes_after", "device_total_bytes"}) and waits until its stdin closes (or
600 s), so the caller decides how long the memory stays held.
"""
import json
import os
import sys

import torch

MiB = 1024 * 1024


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpu_holder.py READY_JSON LEAVE_FREE_BYTES")
    leave = int(sys.argv[2])
    device = torch.device("cuda:0")
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info(device)
    held_bytes = (free - leave) // (2 * MiB) * (2 * MiB)
    held = torch.empty(held_bytes, dtype=torch.uint8, device=device)  # one cudaMalloc of exactly held_bytes
    torch.cuda.synchronize(device)
    free_after, _ = torch.cuda.mem_get_info(device)
    ready = {"pid": os.getpid(), "held_bytes": held_bytes, "device_free_bytes_before": free,
             "device_free_bytes_after": free_after, "device_total_bytes": total}
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.rename(tmp, sys.argv[1])  # the caller polls for the file: it appears complete
    print(f"gpu_holder: holding {held_bytes} B, device free now {free_after} B", flush=True)
    sys.stdin.read()  # until the caller closes the pipe (or dies)
    del held


if __name__ == "__main__":
    main()
