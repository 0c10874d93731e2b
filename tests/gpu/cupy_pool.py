"""CuPy arrays of known sizes through CuPy's default memory pool, for scripts/gpu-check.

    python3 cupy_pool.py [TRUTH_JSON]        (or CUPY_POOL_TRUTH=path; without one, no side file)

CuPy's MemoryPool rounds each request up to 512 bytes and, when no cached chunk fits, gets a new one from
cudaMalloc (with CuPy 14's static cudart that reaches the driver as cuMemAlloc). The pool keeps freed chunks
for reuse, so the device memory the process holds is the pool's total_bytes(), not the live arrays' size.
Sequence: allocate five arrays, free one and allocate the same size again (served from the pool: no new
driver allocation), record total_bytes() at that maximum, then free everything and release the pool's
chunks (free_all_blocks), so memtrace's peak driver bytes must equal that recorded maximum.

Then pinned host memory through CuPy's pinned memory pool (cupy.cuda.alloc_pinned_memory): each buffer is a
cudaHostAlloc (cuMemHostAlloc beneath CuPy's static cudart) of the request rounded up to the pool's 512-byte
unit, all live at once and then freed back to the pool and released (free_all_blocks). memtrace must count them
as pinned host memory, never as device memory: its pinned host peak is their sum, device 0's peak driver bytes
stay the device pool's.
"""
import json
import os
import sys

import cupy as cp

MiB = 1024 * 1024
# Request sizes in bytes; none is a multiple of 512, so the pool's rounding shows.
SIZES = [1 * MiB + 100, 4 * MiB + 3, 9 * MiB + 1000, 16 * MiB + 7, 25 * MiB + 300]
PINNED_SIZES = [2 * MiB + 10, 3 * MiB + 700, 5 * MiB + 1]


def round_up_512(n):
    return (n + 511) // 512 * 512


def truth_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("CUPY_POOL_TRUTH")


def main():
    pool = cp.get_default_memory_pool()
    with cp.cuda.Device(0):
        arrays = [cp.zeros(n, dtype=cp.uint8) for n in SIZES]
        del arrays[2]                                  # back to the pool, still held from the driver
        arrays.append(cp.zeros(SIZES[2], dtype=cp.uint8))  # served from the pool
        cp.cuda.Device(0).synchronize()
        pool_max_total = pool.total_bytes()
        pool_used = pool.used_bytes()
        arrays.clear()
        pool.free_all_blocks()                         # cudaFree of every chunk
        cp.cuda.Device(0).synchronize()
        pool_final_total = pool.total_bytes()

        pinned_pool = cp.get_default_pinned_memory_pool()
        pinned = [cp.cuda.alloc_pinned_memory(n) for n in PINNED_SIZES]
        # What the pool got from cudaHostAlloc for each (the buffer's size, where CuPy says it).
        pinned_bytes = [getattr(p.mem, "size", None) or round_up_512(n) for p, n in zip(pinned, PINNED_SIZES)]
        pinned.clear()
        pinned_free_blocks = pinned_pool.n_free_blocks()
        pinned_pool.free_all_blocks()                   # cudaFreeHost of every buffer

    truth = {
        "device": 0,
        "sizes_bytes": SIZES,
        "expected_pool_bytes": sum(round_up_512(n) for n in SIZES),
        "pool_max_total_bytes": pool_max_total,
        "pool_used_bytes_at_max": pool_used,
        "pool_final_total_bytes": pool_final_total,
        "cupy_version": cp.__version__,
        "pinned_sizes_bytes": PINNED_SIZES,
        "pinned_expected_bytes": sum(round_up_512(n) for n in PINNED_SIZES),
        "pinned_allocated_bytes": pinned_bytes,
        "pinned_peak_bytes": sum(pinned_bytes),
        "pinned_free_blocks_before_release": pinned_free_blocks,
    }
    if truth_path():
        with open(truth_path(), "w") as f:
            json.dump(truth, f, indent=1)
    print(f"cupy_pool: pool total at max {pool_max_total} B (expected {truth['expected_pool_bytes']} B), "
          f"final {pool_final_total} B; pinned {sum(pinned_bytes)} B in {len(pinned_bytes)} buffers")


if __name__ == "__main__":
    main()
