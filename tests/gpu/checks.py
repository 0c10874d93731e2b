"""Compares memtrace's analysis of one GPU workload with the workload's own figures; used by scripts/gpu-check.

    checks.py train_leak NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace [--expect-backend B]
    checks.py program    NAME --summary S.json --leaks L.json --expected E.json --trace T.mtrace
    checks.py cupy       NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace
    checks.py jax        NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace

S.json / L.json are `memtrace summary --json` / `memtrace leaks --json` (keys documented in README.md).
T.json is the side file train_leak.py, cupy_pool.py or jax_alloc.py wrote; E.json is the JSON line an nvcc program printed.
Prints one line per check, `check <name>: expected <x>, measured <y>: ok|FAIL`, plus `info` lines for figures
that are shown but not checked. Exit status 1 when any check failed, 2 when an input cannot be read.
"""
import argparse
import json
import os
import sys

# The limit for the committed example trace; every train_leak trace is held to it.
MAX_TRACE_BYTES = 5 * 1000 * 1000


class Checker:
    def __init__(self, name):
        self.name = name
        self.failed = 0

    def check(self, what, expected, measured, ok=None):
        """One check line; ok defaults to expected == measured."""
        if ok is None:
            ok = expected == measured
        self.failed += not ok
        print(f"check {self.name} {what}: expected {expected}, measured {measured}: {'ok' if ok else 'FAIL'}")

    def info(self, what, text):
        print(f"info {self.name} {what}: {text}")


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"checks.py: {path}: cannot read {what}: {e}", file=sys.stderr)
        sys.exit(2)


def device_entry(summary, device):
    """The summary's devices[] entry for `device`, or {} when the trace has none for it."""
    for entry in summary.get("devices", []):
        if entry.get("device") == device:
            return entry
    return {}


def leak_list(leaks_json):
    """`memtrace leaks --json` output as a list, whether it is the list itself or {"leaks": [...]}."""
    if isinstance(leaks_json, dict):
        return leaks_json.get("leaks", [])
    return leaks_json


def common_trace_checks(c, summary, trace_path, max_bytes=None):
    trace = summary.get("trace", {})
    c.check("trace complete (not truncated)", False, trace.get("truncated"))
    size = os.path.getsize(trace_path)
    if max_bytes is None:
        c.info("trace size", f"{size} B, {trace.get('events')} events")
    else:
        c.check("trace size bytes", f"< {max_bytes}", size, size < max_bytes)


def frame_text(frame):
    return f"{os.path.basename(str(frame.get('file', '')))}:{frame.get('line')}"


def check_train_leak(c, summary, leaks, truth, trace_path, expect_backend):
    if expect_backend:
        c.check("torch allocator backend", expect_backend, truth["allocator_backend"])
    native = truth["allocator_backend"] == "native"
    dev = device_entry(summary, truth["device"])
    common_trace_checks(c, summary, trace_path, MAX_TRACE_BYTES)
    c.info("pytorch", f"torch {truth['torch_version']}, backend {truth['allocator_backend']}, "
                      f"PYTORCH_CUDA_ALLOC_CONF='{truth['alloc_conf']}', {truth['steps']} steps, "
                      f"setup {truth['seconds_setup']:.2f} s, loop {truth['seconds_loop']:.2f} s")

    # memtrace calls a site growing when its live-at-exit allocations span at least half of the trace, so the
    # training loop must dominate the run (CUDA start-up and exit are the rest).
    c.info("timing", f"trace {summary.get('trace', {}).get('duration_s')} s, training loop {truth['seconds_loop']:.2f} s")
    expected_site = f"train_leak.py:{truth['leak_line']}"
    top = leaks[0] if leaks else {}
    frames = top.get("frames", [])
    hit = any(str(f.get("file", "")).endswith("train_leak.py") and f.get("line") == truth["leak_line"]
              for f in frames)
    script_frames = [frame_text(f) for f in frames if str(f.get("file", "")).endswith(".py")]
    c.check("top leak site", f"{expected_site} in leaks[0].frames",
            ", ".join(script_frames[:4]) or "no Python frame", hit)
    c.check("top leak growing", True, top.get("growing"))
    c.check("growth bytes per step", truth["growth_per_step_bytes"], top.get("growth_bytes_per_step"))
    steps = truth["steps"]
    count = top.get("growth_count")
    c.check("growth count", f"in [{steps - 1}, {steps}]", count,
            isinstance(count, int) and steps - 1 <= count <= steps)
    c.check("peak allocated bytes", truth["max_memory_allocated_bytes"], dev.get("peak_allocated_bytes"))
    if native:
        c.check("peak reserved bytes", truth["max_memory_reserved_bytes"], dev.get("peak_reserved_bytes"))
    else:
        # Under cudaMallocAsync the pool, not PyTorch, holds the memory: no PyTorch reserved figure to match.
        c.info("peak reserved bytes", f"torch.cuda.max_memory_reserved() {truth['max_memory_reserved_bytes']}, "
                                      f"memtrace {dev.get('peak_reserved_bytes')} (not checked)")
    c.check("allocator layer seen", native, dev.get("allocator_layer"))
    c.info("peak driver bytes", f"{dev.get('peak_driver_bytes')}")


PROGRAM_KEYS = ["driver_allocations", "driver_frees", "block_allocations", "block_frees", "peak_driver_bytes",
                "final_driver_bytes", "peak_allocated_bytes", "final_allocated_bytes"]


def check_program(c, summary, leaks, expected, trace_path):
    dev = device_entry(summary, expected["device"])
    common_trace_checks(c, summary, trace_path)
    for key in PROGRAM_KEYS:
        c.check(key, expected[key], dev.get(key))
    c.check("leaked allocations", expected["leak_count"], sum(l.get("count", 0) for l in leaks))
    c.check("leaked bytes", expected["leak_bytes"], sum(l.get("bytes", 0) for l in leaks))


def check_cupy(c, summary, leaks, truth, trace_path):
    dev = device_entry(summary, truth["device"])
    common_trace_checks(c, summary, trace_path)
    c.check("peak driver bytes == pool total_bytes() at max", truth["pool_max_total_bytes"],
            dev.get("peak_driver_bytes"))
    c.check("final driver bytes", truth["pool_final_total_bytes"], dev.get("final_driver_bytes"))
    c.info("pool", f"CuPy {truth['cupy_version']}, sum of 512-rounded requests {truth['expected_pool_bytes']}, "
                   f"{len(truth['sizes_bytes'])} chunks expected from the driver, memtrace saw "
                   f"{dev.get('driver_allocations')} driver allocations")


def check_jax(c, summary, leaks, truth, trace_path):
    dev = device_entry(summary, truth["device"])
    common_trace_checks(c, summary, trace_path)
    # XLA's pool is one driver allocation carved up by its own allocator: memtrace sees the pool, so only a bound
    # on the arrays' total can be exact; XLA's own figures are shown beside it.
    peak = dev.get("peak_driver_bytes")
    c.check("peak driver bytes >= arrays' bytes", f">= {truth['arrays_bytes']}", peak,
            isinstance(peak, int) and peak >= truth["arrays_bytes"])
    stats = truth["memory_stats"]
    c.info("xla", f"jax {truth['jax_version']}, memory_stats bytes_in_use {stats.get('bytes_in_use')}, "
                  f"pool_bytes {stats.get('pool_bytes')}, bytes_reserved {stats.get('bytes_reserved')}, "
                  f"bytes_limit {stats.get('bytes_limit')}; memtrace driver allocations "
                  f"{dev.get('driver_allocations')}, peak driver {peak}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["train_leak", "program", "cupy", "jax"])
    parser.add_argument("name")
    parser.add_argument("--summary", required=True)
    parser.add_argument("--leaks", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--truth")
    parser.add_argument("--expected")
    parser.add_argument("--expect-backend", help="train_leak: torch.cuda.get_allocator_backend() the run must use")
    args = parser.parse_args()

    c = Checker(args.name)
    summary = load_json(args.summary, "memtrace summary --json output")
    leaks = leak_list(load_json(args.leaks, "memtrace leaks --json output"))
    if args.kind == "program":
        check_program(c, summary, leaks, load_json(args.expected, "the program's expected figures"), args.trace)
    elif args.kind == "train_leak":
        check_train_leak(c, summary, leaks, load_json(args.truth, "train_leak.py's side file"), args.trace,
                         args.expect_backend)
    elif args.kind == "cupy":
        check_cupy(c, summary, leaks, load_json(args.truth, "cupy_pool.py's side file"), args.trace)
    else:
        check_jax(c, summary, leaks, load_json(args.truth, "jax_alloc.py's side file"), args.trace)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
