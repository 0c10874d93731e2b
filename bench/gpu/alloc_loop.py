"""One process's time per PyTorch block allocator event, for comparing tracer builds and settings one
process at a time (scripts/gpu-phase-cycles runs it under each).

    python3 alloc_loop.py [--seconds-per-rep 1] [--reps 5] [--depth 20]

Allocates and frees at once torch.empty of 512 B, 64 KiB, 1 MiB and 4 MiB on the GPU (from PyTorch's cache
after the warm-up: no CUDA call), --depth Python frames below the loop, as bench/gpu/alloc_cost.py does.
Prints one line: the median over --reps repetitions of wall ns per event (an allocation is two events, ALLOC
and FREE) and of process CPU ns per event (every thread: a tracer's writer too).
"""
import argparse
import statistics
import time

import torch

SIZES_BYTES = (512, 64 << 10, 1 << 20, 4 << 20)
BURSTS_PER_CHECK = 100


def burst():
    for size in SIZES_BYTES:
        t = torch.empty(size, dtype=torch.uint8, device="cuda")
        del t


def at_depth(depth, fn):
    return fn() if depth == 0 else at_depth(depth - 1, fn)


def one_rep(seconds):
    """(wall ns, process CPU ns) per event over about `seconds`."""
    events = 0
    wall0, cpu0 = time.perf_counter_ns(), time.process_time_ns()
    end = wall0 + seconds * 1e9
    while True:
        for _ in range(BURSTS_PER_CHECK):
            burst()
        events += BURSTS_PER_CHECK * len(SIZES_BYTES) * 2
        wall = time.perf_counter_ns()
        if wall >= end:
            break
    return (wall - wall0) / events, (time.process_time_ns() - cpu0) / events


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds-per-rep", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--depth", type=int, default=20)
    args = parser.parse_args()
    at_depth(args.depth, lambda: one_rep(1.0))  # warm-up: fills the cache, first calls
    reps = [at_depth(args.depth, lambda: one_rep(args.seconds_per_rep)) for _ in range(args.reps)]
    wall = statistics.median(r[0] for r in reps)
    cpu = statistics.median(r[1] for r in reps)
    print(f"wall_ns_per_event {wall:.1f} cpu_ns_per_event {cpu:.1f} reps {args.reps}")


if __name__ == "__main__":
    main()
