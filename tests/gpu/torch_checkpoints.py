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

Fragmentation, from torch.cuda.memory_snapshot() at each checkpoint: the number of segments and the largest
inactive block (PyTorch merges neighbouring free blocks, so each inactive block is one whole gap between live
blocks of a segment, its head or its tail). memtrace rebuilds both from block addresses inside segments.
"""
import json
import os
import sys
import time

import torch

MiB = 1024 * 1024


def snapshot_fragmentation(device_index):
    """(segment count, largest inactive block bytes, reserved bytes) of the device from memory_snapshot(); Nones
    under backend:cudaMallocAsync, which keeps no blocks and refuses to take a snapshot."""
    if torch.cuda.get_allocator_backend() != "native":
        return None, None, None
    segments = [s for s in torch.cuda.memory_snapshot() if s.get("device") == device_index]
    inactive = [b["size"] for s in segments for b in s.get("blocks", []) if b.get("state") == "inactive"]
    return len(segments), max(inactive, default=0), sum(s.get("total_size", 0) for s in segments)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_checkpoints.py TRUTH_JSON")
    device = torch.device("cuda:0")
    checkpoints = []

    def checkpoint(name):
        torch.cuda.synchronize(device)
        stats = torch.cuda.memory_stats(device)
        segments, largest_free, snapshot_reserved = snapshot_fragmentation(0)
        now = time.monotonic_ns()
        checkpoints.append({
            "name": name,
            "monotonic_ns": now,
            "allocated_bytes": stats.get("allocated_bytes.all.current"),
            "reserved_bytes": stats.get("reserved_bytes.all.current"),
            "segments": stats.get("segment.all.current"),
            "snapshot_segments": segments,
            "snapshot_largest_free_block_bytes": largest_free,
            "snapshot_reserved_bytes": snapshot_reserved,
        })
        print(f"checkpoint {name}: allocated {checkpoints[-1]['allocated_bytes']} "
              f"reserved {checkpoints[-1]['reserved_bytes']}, {segments} segments, largest free block {largest_free}")

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
