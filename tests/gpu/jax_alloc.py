"""JAX arrays of known sizes on the first GPU, for scripts/gpu-check.

    python3 jax_alloc.py [TRUTH_JSON]        (or JAX_ALLOC_TRUTH=path; without one, no side file)

XLA loads libcuda with dlopen and looks its memory functions up with dlsym (cuMemCreate, cuMemMap, ...), a path
no exported wrapper sees (see docs/cuda-interception.md). Its BFC allocator takes one large pool from
the driver (75% of the device by default) and carves arrays out of it, so memtrace's driver-level peak must be
at least the arrays' total; XLA's own figures (memory_stats()) are written to the side file for comparison.
"""
import json
import os
import sys

import jax
import jax.numpy as jnp

MiB = 1024 * 1024
# float32 element counts: 4, 12, 36 and 100 MiB arrays.
ELEMENTS = [1 * MiB, 3 * MiB, 9 * MiB, 25 * MiB]


def truth_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("JAX_ALLOC_TRUTH")


def main():
    device = jax.devices("gpu")[0]
    arrays = [jax.device_put(jnp.ones(n, dtype=jnp.float32), device) for n in ELEMENTS]
    for a in arrays:
        a.block_until_ready()
    stats = device.memory_stats() or {}
    truth = {
        "device": 0,
        "arrays_bytes": sum(4 * n for n in ELEMENTS),
        "memory_stats": {k: v for k, v in stats.items() if isinstance(v, int)},
        "jax_version": jax.__version__,
        "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", ""),
    }
    if truth_path():
        with open(truth_path(), "w") as f:
            json.dump(truth, f, indent=1)
    print(f"jax_alloc: arrays {truth['arrays_bytes']} B, memory_stats {truth['memory_stats']}")


if __name__ == "__main__":
    main()
