"""JAX (XLA) with XLA_PYTHON_CLIENT_PREALLOCATE=false: XLA's own device memory figures at checkpoints, for
scripts/gpu-check to line up with the rows of `memtrace timeline --json`.

    XLA_PYTHON_CLIENT_PREALLOCATE=false python3 jax_stats.py TRUTH_JSON

Without preallocation XLA's BFC allocator takes memory from the driver as it needs it and carves arrays out of
it: device.memory_stats() reports "pool_bytes" (what the allocator holds from the driver, when XLA reports it),
"bytes_in_use" (live arrays) and their peaks. memtrace sees the driver calls (XLA looks them up with dlsym), not
the BFC allocator's carving, so its driver bytes are compared with pool_bytes, and bytes_in_use is shown beside
its allocated bytes. At each checkpoint the arrays are ready (block_until_ready) before memory_stats() and then
time.monotonic_ns() (the tracer's clock) are read.
"""
import json
import os
import sys
import time

import jax
import jax.numpy as jnp

MiB = 1024 * 1024


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: jax_stats.py TRUTH_JSON")
    device = jax.devices("gpu")[0]
    checkpoints = []

    def checkpoint(name, arrays):
        for a in arrays:
            a.block_until_ready()
        stats = device.memory_stats() or {}
        now = time.monotonic_ns()
        checkpoints.append({"name": name, "monotonic_ns": now,
                            "memory_stats": {k: v for k, v in stats.items() if isinstance(v, int)}})
        print(f"checkpoint {name}: bytes_in_use {stats.get('bytes_in_use')} pool_bytes {stats.get('pool_bytes')} "
              f"bytes_reserved {stats.get('bytes_reserved')}")

    # float32 arrays of 16, 64 and 200 MiB + a little.
    a = jax.device_put(jnp.ones(4 * MiB, dtype=jnp.float32), device)
    checkpoint("1 16 MiB", [a])
    b = jax.device_put(jnp.ones(16 * MiB, dtype=jnp.float32), device)
    c = jax.device_put(jnp.ones(50 * MiB + 1000, dtype=jnp.float32), device)
    checkpoint("2 + 64 + 200 MiB", [b, c])
    del b
    checkpoint("3 64 MiB freed", [a, c])
    d = (c * 2.0 + 1.0).block_until_ready()
    checkpoint("4 computed", [a, c, d])

    truth = {
        "device": 0,
        "jax_version": jax.__version__,
        "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", ""),
        "allocator": os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", ""),
        "checkpoints": checkpoints,
    }
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f, indent=1)


if __name__ == "__main__":
    main()
