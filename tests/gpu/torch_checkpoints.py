"""PyTorch's own allocated and reserved figures at a few moments, for scripts/gpu-check to line up with the rows of
`memtrace timeline --json`.

    python3 torch_checkpoints.py TRUTH_JSON

At each checkpoint, after torch.cuda.synchronize(), the script reads torch.cuda.memory_stats() and then
time.monotonic_ns() (CLOCK_MONOTONIC, the tracer's clock): every allocator event of the checkpoint happened before
that time, none after. The row of memtrace's timeline in effect then (the last one at or before it) must hold
exactly memory_stats()["allocated_bytes.all.current"] and, for PyTorch's native allocator,
["reserved_bytes.all.current"]. The allocator is whatever PYTORCH_CUDA_ALLOC_CONF selects (default, expandable
segments, cudaMallocAsync). Sizes are odd on purpose (PyTorch rounds blocks to 512 bytes, large segments to 2 MiB),
and small (< 1 MiB) and large blocks are both used; an empty_cache() between two checkpoints gives memory back.
"""
import json
import os
import sys
import time

import torch

MiB = 1024 * 1024


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_checkpoints.py TRUTH_JSON")
    device = torch.device("cuda:0")
    checkpoints = []

    def checkpoint(name):
        torch.cuda.synchronize(device)
        stats = torch.cuda.memory_stats(device)
        now = time.monotonic_ns()
        checkpoints.append({
            "name": name,
            "monotonic_ns": now,
            "allocated_bytes": stats.get("allocated_bytes.all.current"),
            "reserved_bytes": stats.get("reserved_bytes.all.current"),
            "segments": stats.get("segment.all.current"),
        })
        print(f"checkpoint {name}: allocated {checkpoints[-1]['allocated_bytes']} "
              f"reserved {checkpoints[-1]['reserved_bytes']}")

    big = torch.empty(100 * MiB + 3000, dtype=torch.uint8, device=device)
    small = [torch.empty(1000 + 17 * i, dtype=torch.uint8, device=device) for i in range(40)]
    checkpoint("1 big + 40 small")

    bigger = torch.empty(300 * MiB + 12345, dtype=torch.uint8, device=device)
    checkpoint("2 + 300 MiB")

    del big
    del small[::2]
    checkpoint("3 freed, cached")

    torch.cuda.empty_cache()
    checkpoint("4 after empty_cache")

    a = torch.randn(2048, 2049, device=device)
    b = a @ a.T  # a result and cuBLAS workspace
    checkpoint("5 matmul")

    del a, b, bigger, small
    torch.cuda.empty_cache()
    checkpoint("6 all freed")

    truth = {
        "device": 0,
        "torch_version": torch.__version__,
        "allocator_backend": torch.cuda.get_allocator_backend(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "checkpoints": checkpoints,
    }
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f, indent=1)


if __name__ == "__main__":
    main()
