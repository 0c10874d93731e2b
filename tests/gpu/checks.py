"""Compares memtrace's analysis of one GPU workload with the workload's own figures; used by scripts/gpu-check.

    checks.py train_leak NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace [--expect-backend B]
    checks.py program    NAME --summary S.json --leaks L.json --expected E.json --trace T.mtrace
    checks.py cupy       NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace
    checks.py jax        NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace
    checks.py dataloader NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace --plain P.json
                              --trace-dir DIR
    checks.py profiler   NAME --summary S.json --leaks L.json --truth T.json --trace T.mtrace --plain P.json
                              --output JOB.out --plain-output PLAIN.out
    checks.py killed     NAME --summary S.json --leaks L.json --trace T.mtrace --progress PROGRESS --start START.json
                              --kill-time UNIX_S --flush-ms MS --pid PID --exit-status RC [--signal N]
    checks.py memory_model NAME --summary S.json --leaks L.json --trace T.mtrace --truth T.json --timeline TL.json
    checks.py ipc_child  NAME --summary S.json --leaks L.json --trace T.mtrace --truth T.json
    checks.py torch_checkpoints NAME --summary S.json --leaks L.json --trace T.mtrace --truth T.json --timeline TL.json
                              [--expect-backend B]
    checks.py jax_stats  NAME --summary S.json --leaks L.json --trace T.mtrace --truth T.json --timeline TL.json
    checks.py oom_other  NAME --summary S.json --leaks L.json --trace T.mtrace --truth T.json --oom O.json
                              --holder H.json
    checks.py saved_oom  NAME --summary S.json --leaks L.json --trace T.mtrace --truth T.json --oom O.json

S.json / L.json are `memtrace summary --json` / `memtrace leaks --json` (keys: docs/json.md, docs/schema/memtrace.schema.json).
T.json is the side file train_leak.py, cupy_pool.py, jax_alloc.py, dataloader_job.py or profiler_job.py wrote (P.json:
the same job's side file from its run without memtrace); E.json is the JSON line an nvcc program printed.
PROGRESS and START.json are train_until_killed.py's files; UNIX_S is when gpu-check sent SIGKILL to it.
TL.json is `memtrace timeline --json`, O.json `memtrace oom --json`, H.json gpu_holder.py's ready file.
Prints one line per check, `check <name>: expected <x>, measured <y>: ok|FAIL`, plus `info` lines for figures
that are shown but not checked. Exit status 1 when any check failed, 2 when an input cannot be read.
"""
import argparse
import json
import math
import os
import re
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
    # Pinned host buffers: host memory, in its own category, never in the device's driver bytes (checked above).
    c.check("pinned host peak bytes (alloc_pinned_memory buffers)", truth["pinned_peak_bytes"],
            category_value(summary, truth["device"], "host_pinned", "peak"))
    c.check("pinned host final bytes", 0, category_value(summary, truth["device"], "host_pinned", "final"))
    c.info("pool", f"CuPy {truth['cupy_version']}, sum of 512-rounded requests {truth['expected_pool_bytes']}, "
                   f"{len(truth['sizes_bytes'])} chunks expected from the driver, memtrace saw "
                   f"{dev.get('driver_allocations')} driver allocations; pinned buffers {truth['pinned_allocated_bytes']} "
                   f"(requests rounded to 512: {truth['pinned_expected_bytes']})")


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


def end_how(trace):
    """How the traced process ended, from `memtrace summary --json`'s trace object: trace.end.how ("EXIT",
    "UNDERSCORE_EXIT", "SIGNAL", "EXEC"), or None when the trace has no end record (it was cut off). An analyzer
    older than trace.end only says whether there was one (ended_normally), and then every end record was an exit."""
    if "end" in trace:
        end = trace["end"]
        return end.get("how") if isinstance(end, dict) else None
    return "EXIT" if trace.get("ended_normally") else None


def complete_exit_checks(c, summary):
    """The trace of a process that exited normally: read to its end record, nothing cut off."""
    trace = summary.get("trace", {})
    c.check("trace complete (not truncated)", False, trace.get("truncated"))
    c.check("trace end record", "EXIT", end_how(trace))


def names_text(names, limit=6):
    names = list(names)
    shown = ", ".join(n if len(n) <= 80 else n[:77] + "..." for n in names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}] ({len(names)})"


def check_dataloader(c, summary, truth, plain, trace_path, trace_dir):
    c.info("runs", f"torch {truth['torch_version']}, start method {truth['start_method']}, {truth['num_workers']} "
                   f"workers, {truth['epochs']} epochs; {plain['seconds']:.1f} s without memtrace, "
                   f"{truth['seconds']:.1f} s with")
    # The workers' output is exact (seeded CPU generators, a seeded shuffle); the loss went through the GPU.
    for key in ("batches", "samples", "samples_sum"):
        c.check(f"{key} with memtrace == without", plain[key], truth[key])
    c.check("final loss with memtrace == without (relative 1e-6)", plain["final_loss"], truth["final_loss"],
            math.isclose(plain["final_loss"], truth["final_loss"], rel_tol=1e-6))
    c.check("samples made in the main process (workers made them all)", 0, truth["samples_from_main_process"])
    c.info("worker processes", f"{len(truth['worker_pids'])} distinct pids made samples "
                               f"({truth['epochs']} epochs x {truth['num_workers']} workers started)")
    # The workers never call CUDA: the directory holds the main process's file and nothing else.
    files = sorted(os.listdir(trace_dir))
    expected = [os.path.basename(trace_path)]
    c.check("trace files in the output directory", names_text(expected), names_text(files), files == expected)
    complete_exit_checks(c, summary)
    dev = device_entry(summary, 0)
    c.check("peak allocated bytes", truth["max_memory_allocated_bytes"], dev.get("peak_allocated_bytes"))


RELATIONSHIP_WARNING = "Failed to recover relationship"


def lines_containing(path, text):
    try:
        with open(path, errors="replace") as f:
            return sum(text in line for line in f)
    except OSError as e:
        print(f"checks.py: {path}: cannot read the job's output: {e}", file=sys.stderr)
        sys.exit(2)


def check_profiler(c, summary, truth, plain, output, plain_output):
    plain_names, names = set(plain["kernel_names"]), set(truth["kernel_names"])
    # Without this the comparisons below could pass with a profiler that saw nothing at all.
    c.check("profiler sees kernels and CUDA memory events without memtrace", "> 0 of each",
            f"{len(plain_names)} kernel names, {plain['cuda_memory_events']} CUDA memory events",
            len(plain_names) > 0 and plain["cuda_memory_events"] > 0)
    differing = sorted(plain_names ^ names)
    c.check("kernel names with memtrace == without", f"{len(plain_names)} names",
            f"{len(names)} names" + (f", in one run only: {names_text(differing, 3)}" if differing else ""),
            names == plain_names)
    c.check("memory events with memtrace == without", plain["memory_events"], truth["memory_events"])
    c.check("CUDA memory events with memtrace == without", plain["cuda_memory_events"], truth["cuda_memory_events"])
    c.info("kernel events", f"{plain['kernel_events']} without memtrace, {truth['kernel_events']} with")
    c.check(f"'{RELATIONSHIP_WARNING}' warnings with memtrace", 0, lines_containing(output, RELATIONSHIP_WARNING))
    c.info(f"'{RELATIONSHIP_WARNING}' warnings without memtrace", lines_containing(plain_output, RELATIONSHIP_WARNING))
    c.info("python warnings", f"{len(plain['warnings'])} without memtrace, {len(truth['warnings'])} with")
    complete_exit_checks(c, summary)
    dev = device_entry(summary, 0)
    c.check("peak allocated bytes", truth["max_memory_allocated_bytes"], dev.get("peak_allocated_bytes"))


def read_progress(path):
    """train_until_killed.py's progress file as [(steps_completed, unix_time_s)], in order; a torn line is skipped."""
    progress = []
    try:
        with open(path) as f:
            for line in f:
                # Only whole lines: the time always has 6 decimals and the line its newline.
                match = re.fullmatch(r"(\d+) (\d+\.\d{6})\n", line)
                if match:
                    progress.append((int(match[1]), float(match[2])))
    except OSError as e:
        print(f"checks.py: {path}: cannot read the progress file: {e}", file=sys.stderr)
        sys.exit(2)
    return progress


def leak_site_at(leaks, file_name, line):
    """The live-at-exit site whose frames include file_name:line with the most allocations (the kept losses,
    not the single blocks of a step cut short), or {}."""
    sites = [l for l in leaks
             if any(os.path.basename(str(f.get("file", ""))) == file_name and f.get("line") == line
                    for f in l.get("frames", []))]
    return max(sites, key=lambda l: l.get("count", 0), default={})


def check_killed(c, summary, leaks, start, progress, kill_time_s, flush_ms, pid, exit_status, min_steps, signal):
    # `memtrace run` replaces itself with the command, so the pid gpu-check started and killed is Python's.
    c.check("pid of memtrace run == pid of the python process", pid, start["pid"])
    c.check(f"exit status of the killed job (128 + signal {signal})", 128 + signal, exit_status)
    completed = progress[-1][0] if progress else 0
    c.check("steps completed before the kill", f">= {min_steps}", completed, completed >= min_steps)

    trace = summary.get("trace", {})
    how = end_how(trace)
    if signal == 9:
        c.check("trace end record", "none (cut off)", how or "none (cut off)", how is None)
    else:  # caught: the tracer's handler wrote everything and an end record naming the signal
        c.check("trace end record", f"SIGNAL {signal}", f"{how} {(trace.get('end') or {}).get('signal')}")
        c.check("trace complete (not truncated)", False, trace.get("truncated"))
    c.info("trace", f"truncated {trace.get('truncated')}, {trace.get('events')} events in {trace.get('chunks')} "
                    f"chunks, {trace.get('complete_bytes')} complete bytes, last event at "
                    f"{trace.get('last_event_time_s')} s")

    # Which loss blocks must be in the file. Step k's block is allocated before its progress line is written (the
    # step is synchronized first), so before that line's time t_k. The writer flushes every flush_ms: a block
    # allocated at t is handed to write() by the first flush after t, i.e. by t + flush_ms, plus the time that
    # flush takes (compressing and writing one chunk, being scheduled on a busy machine), for which a second
    # flush_ms is allowed. SIGKILL does not lose what write() already handed to the kernel. So every step with
    # t_k <= kill time - 2 * flush_ms must be there; like check_train_leak (growth count in [steps - 1, steps]),
    # the growing site may hold one of them fewer, when one step's block is recorded under a different stack.
    # At most the completed steps plus the one in flight (its loss may be allocated when the kill comes) can be
    # there.
    # A caught signal loses nothing: every step completed before the kill must be there.
    cutoff_s = kill_time_s - 2 * flush_ms / 1000 if signal == 9 else kill_time_s
    must_have = max((steps for steps, t in progress if t <= cutoff_s), default=0)
    lower = max(must_have - 1, 0)
    site = leak_site_at(leaks, os.path.basename(start["leak_file"]), start["leak_line"])
    count = site.get("growth_count") if site else None
    measured = (f"{count} (growing {site.get('growing')}, {site.get('count')} allocations of "
                f"{site.get('growth_bytes_per_step')} B)") if site else \
        f"no live site at {os.path.basename(start['leak_file'])}:{start['leak_line']}"
    c.check("loss blocks in the trace (leak site growth count)", f"in [{lower}, {completed + 1}]", measured,
            isinstance(count, int) and lower <= count <= completed + 1)
    last_s = kill_time_s - progress[-1][1] if progress else float("nan")
    c.info("progress", f"{completed} steps completed, the last at kill time - {last_s:.3f} s; {must_have} completed "
                       + (f"at least 2 x {flush_ms} ms before the kill" if signal == 9 else "before the signal"))


# ---- issue 4: the memory model, checkpoints against the frameworks' own figures, OOM reports ----

# Where `memtrace summary --json` reports each category of issue 4's rule 3 (and graph memory and address space):
# (section, peak key, final key); section "device" is the device's devices[] entry, "process" the process-wide
# object (host memory is never charged to a GPU; address space belongs to no device).
CATEGORY_KEYS = {
    "managed": ("device", "peak_managed_bytes", "final_managed_bytes"),
    "array": ("device", "peak_array_bytes", "final_array_bytes"),
    "imported": ("device", "peak_imported_bytes", "final_imported_bytes"),
    "graph": ("device", "peak_graph_bytes", "final_graph_bytes"),
    "pools_reserved": ("device", "peak_pools_reserved_bytes", "final_pools_reserved_bytes"),
    "host_pinned": ("process", "peak_host_pinned_bytes", "host_pinned_bytes"),
    "host_registered": ("process", "peak_host_registered_bytes", "host_registered_bytes"),
    "address_space": ("process", "peak_address_space_reserved_bytes", "address_space_reserved_bytes"),
}


def category_value(summary, device, category, stat):
    """Device `device`'s (or the process's) `stat` ("peak" or "final") of `category` from summary --json."""
    section, peak_key, final_key = CATEGORY_KEYS[category]
    where = device_entry(summary, device) if section == "device" else summary.get("process", {})
    return where.get(peak_key if stat == "peak" else final_key)


def start_ns(summary):
    return summary.get("trace", {}).get("start_monotonic_ns")


def row_at(timeline, device, start, t_ns):
    """The row of `memtrace timeline --json` for `device` in effect at CLOCK_MONOTONIC time t_ns: the last one (in
    file order) whose time is at or before it; an all-zero row before the device's first."""
    row = {"time_s": None, "allocated_bytes": 0, "reserved_bytes": 0, "driver_bytes": 0}
    for r in timeline.get("rows", []):
        if r.get("device") == device and start + round(r["time_s"] * 1e9) <= t_ns:
            row = r
    return row


def checkpoint_rows(c, summary, timeline, checkpoints, device):
    """(checkpoint, row in effect) pairs; one FAIL line and no pairs when the summary cannot place them in time."""
    start = start_ns(summary)
    c.check("summary trace.start_monotonic_ns present", "an integer", start, isinstance(start, int))
    if not isinstance(start, int):
        return []
    return [(cp, row_at(timeline, device, start, cp["monotonic_ns"])) for cp in checkpoints]


def check_memory_model(c, summary, timeline, truth, trace_path):
    device = truth["device"]
    dev = device_entry(summary, device)
    common_trace_checks(c, summary, trace_path)
    c.info("driver calls", f"through {truth['driver_path']}")
    for cp, row in checkpoint_rows(c, summary, timeline, truth["checkpoints"], device):
        where = f"at {cp['name']}"
        for key in ("allocated_bytes", "reserved_bytes", "driver_bytes"):
            c.check(f"{where}: timeline {key}", cp[key], row.get(key))
        c.info(f"{where}: driver's readings",
               f"pools reserved: default {cp['default_pool_reserved_bytes']}, user {cp['user_pool_reserved_bytes']}, "
               f"graph {cp['graph_pool_reserved_bytes']}")
    for key in ("peak_allocated_bytes", "final_allocated_bytes", "peak_reserved_bytes", "final_reserved_bytes",
                "final_driver_bytes"):
        c.check(key, truth[key], dev.get(key))
    for category, (peak, final) in truth["categories"].items():
        c.check(f"{category} peak bytes", peak, category_value(summary, device, category, "peak"))
        c.check(f"{category} final bytes", final, category_value(summary, device, category, "final"))
    facts = truth["facts"]
    c.info("facts", ", ".join(f"{k} {v}" for k, v in facts.items() if not k.startswith("teardown_")))
    teardown_verdict(c, facts)
    # DEVICE_USAGE (NVML): samples with this process's own figure. NVML's total is the whole memory, more than
    # cuMemGetInfo's (150,754,820,096 B against 150,109,880,320 B on the H200): shown, not compared.
    usage = dev.get("device_usage") or {}
    last = usage.get("last") or {}
    # The peak sample, not the last: the last is taken at exit, where CUDA may already have torn the context
    # down and NVML lists the process with nothing.
    peak = usage.get("peak") or {}
    c.check("NVML samples with this process's use", "device_usage.peak.process_used_bytes > 0",
            peak.get("process_used_bytes"), isinstance(peak.get("process_used_bytes"), int)
            and peak["process_used_bytes"] > 0)
    c.info("device total", f"NVML {last.get('device_total_bytes')} B, cuMemGetInfo {facts['device_total_bytes']} B")
    for which in ("last", "peak"):
        u = usage.get(which) or {}
        c.info(f"device usage ({which})", f"at {u.get('time_s')} s: process {u.get('process_used_bytes')} B (NVML), "
                                          f"accounted {u.get('accounted_bytes')} B, context and unattributed "
                                          f"{u.get('context_and_unattributed_bytes')} B, other processes "
                                          f"{u.get('other_processes_used_bytes')} B, device free "
                                          f"{u.get('device_free_bytes')} of {u.get('device_total_bytes')} B")


def teardown_verdict(c, facts):
    """What the driver freed when the created context was destroyed, from cuMemGetInfo (issue 4's rule 6 assumes:
    the cuMemAlloc, not the cuMemCreate handle)."""
    context = facts["teardown_context_bytes"]
    freed = facts["teardown_freed_by_destroy_bytes"]
    alloc, create = facts["teardown_cumemalloc_bytes"], facts["teardown_cumemcreate_bytes"]
    beyond_context = freed - context
    # The driver's free figure moves in 2 MiB pages and a context's own use changes a little with what it did:
    # half the VMM handle's size separates the two readings.
    handle_freed = beyond_context - alloc > create // 2
    c.info("context teardown (measured)",
           f"context {context} B; cuCtxDestroy gave back {freed} B = context + {beyond_context} B "
           f"(cuMemAlloc {alloc} B, cuMemCreate {create} B): the driver freed the cuMemAlloc "
           f"{'and' if handle_freed else 'but not'} the cuMemCreate handle; cuMemRelease afterwards returned "
           f"{facts['teardown_release_result']} and gave back {facts['teardown_freed_by_release_bytes']} B")
    # The rule frees a device's allocations with "its" context; the primary context's must survive the
    # destruction of another one (the allocations carry no context: a model that frees them all fails G2).
    c.info("primary context's allocation after cuCtxDestroy of another (measured)",
           f"cuMemGetAddressRange returned {facts['teardown_survivor_range_result']}, range "
           f"{facts['teardown_survivor_range_bytes']} B for the {facts['teardown_survivor_bytes']} B cudaMalloc: "
           + ("alive" if facts["teardown_survivor_range_result"] == 0 else "gone"))


def check_ipc_child(c, summary, truth, trace_path):
    common_trace_checks(c, summary, trace_path)
    dev = device_entry(summary, truth["device"])
    c.check("imported peak bytes (cuMemGetAddressRange)", truth["imported_peak_bytes"],
            category_value(summary, truth["device"], "imported", "peak"))
    c.check("imported final bytes", truth["imported_final_bytes"],
            category_value(summary, truth["device"], "imported", "final"))
    # Imports are never this process's memory; a device with no entry at all holds nothing.
    for key in ("peak_allocated_bytes", "peak_reserved_bytes", "peak_driver_bytes"):
        c.check(key, truth[key], dev.get(key, 0))


def check_torch_checkpoints(c, summary, timeline, truth, trace_path, expect_backend):
    if expect_backend:
        c.check("torch allocator backend", expect_backend, truth["allocator_backend"])
    native = truth["allocator_backend"] == "native"
    common_trace_checks(c, summary, trace_path)
    for cp, row in checkpoint_rows(c, summary, timeline, truth["checkpoints"], truth["device"]):
        where = f"at {cp['name']}"
        c.check(f"{where}: timeline allocated == memory_stats allocated_bytes.all.current", cp["allocated_bytes"],
                row.get("allocated_bytes"))
        if native:
            c.check(f"{where}: timeline reserved == memory_stats reserved_bytes.all.current", cp["reserved_bytes"],
                    row.get("reserved_bytes"))
            # Fragmentation rebuilt from block addresses inside segments == PyTorch's own segment list.
            c.check(f"{where}: timeline segment count == memory_snapshot() segments", cp["snapshot_segments"],
                    row.get("segment_count"))
            c.check(f"{where}: timeline largest free block == largest inactive block of memory_snapshot()",
                    cp["snapshot_largest_free_block_bytes"], row.get("largest_free_block_bytes"))
        else:
            # PyTorch asks the pool for its reserved memory when memory_stats() runs; memtrace has the pool's latest
            # sample (after an allocation, a trim or a synchronization). Shown, not checked.
            same = cp["reserved_bytes"] == row.get("reserved_bytes")
            c.info(f"{where}: reserved", f"memory_stats {cp['reserved_bytes']}, memtrace (pool samples) "
                                         f"{row.get('reserved_bytes')}: "
                                         f"{'equal' if same else diff_note(cp['reserved_bytes'], row.get('reserved_bytes'))}")


def diff_note(torch_reserved, memtrace_reserved):
    """Why memtrace's reserved can exceed PyTorch's under cudaMallocAsync: PyTorch counts its pool only; memtrace
    adds the device's driver-layer memory outside any pool (libraries' own cudaMalloc)."""
    if not isinstance(memtrace_reserved, int):
        return "memtrace has no figure"
    return (f"differ by {memtrace_reserved - torch_reserved} B: memtrace's reserved is the pools' samples plus the "
            f"device's driver-layer memory outside them, PyTorch's is its pool alone")


def check_jax_stats(c, summary, timeline, truth, trace_path):
    common_trace_checks(c, summary, trace_path)
    c.info("xla", f"jax {truth['jax_version']}, XLA_PYTHON_CLIENT_PREALLOCATE={truth['preallocate']!r}, "
                  f"memory_stats keys {sorted(truth['checkpoints'][0]['memory_stats'])}")
    # XLA holds a little device memory outside its pool (measured with preallocation: 50,696 B more than
    # pool_bytes, taken at start-up), so the exact comparison is of changes: from one checkpoint to the next,
    # memtrace's driver bytes move by exactly what XLA's pool_bytes moves by, and the offset is shown.
    previous = outside = None
    for cp, row in checkpoint_rows(c, summary, timeline, truth["checkpoints"], truth["device"]):
        stats, where = cp["memory_stats"], f"at {cp['name']}"
        pool, driver = stats.get("pool_bytes"), row.get("driver_bytes")
        if pool is None:
            c.check(f"{where}: XLA reports pool_bytes", "an integer", "absent")
            continue
        if previous is not None:
            c.check(f"{where}: change of timeline driver_bytes == change of memory_stats pool_bytes",
                    pool - previous[0], driver - previous[1] if isinstance(driver, int) else driver)
        previous = (pool, driver if isinstance(driver, int) else 0)
        c.info(where, f"memory_stats pool_bytes {pool}, bytes_in_use {stats.get('bytes_in_use')}; timeline driver "
                      f"{driver} (outside the pool: {driver - pool if isinstance(driver, int) else '?'}), allocated "
                      f"{row.get('allocated_bytes')}")
        if outside is None and isinstance(driver, int):
            outside = driver - pool
    last = truth["checkpoints"][-1]["memory_stats"]
    if outside is not None and "peak_pool_bytes" in last:
        peak = device_entry(summary, truth["device"]).get("peak_driver_bytes")
        c.check("peak driver bytes - memory outside the pool == memory_stats peak_pool_bytes", last["peak_pool_bytes"],
                peak - outside if isinstance(peak, int) else peak)


def oom_list(oom):
    return oom.get("ooms", []) if isinstance(oom, dict) else []


def causes_of(entry):
    return [d.get("cause") for d in entry.get("diagnoses", [])]


def check_oom_other(c, summary, oom, truth, holder, trace_path):
    common_trace_checks(c, summary, trace_path)
    c.check("the traced allocation failed", True, truth["failed"])
    ooms = oom_list(oom)
    c.check("OOMs in memtrace oom --json", ">= 1", len(ooms), len(ooms) >= 1)
    if not ooms:
        return
    first = ooms[0]
    c.check("requested bytes", truth["request_bytes"], first.get("requested_bytes"))
    causes = causes_of(first)
    c.check("first diagnosis", "other_processes", causes[0] if causes else "none")
    usage = first.get("device_usage") or {}
    other, held = usage.get("other_processes_used_bytes"), holder["held_bytes"]
    c.check("other processes' use (NVML) within 1% of what the holder allocated", f"{held} +- 1%", other,
            isinstance(other, int) and abs(other - held) <= held / 100)
    free = first.get("device_free_bytes")
    c.check("device free at the failure < request", f"< {truth['request_bytes']}", free,
            isinstance(free, int) and free < truth["request_bytes"])
    c.info("figures", f"holder held {held} B; NVML other processes {other} B, this process "
                      f"{usage.get('process_used_bytes')} B; device free {free} of {first.get('device_total_bytes')} B")


def site_rank(sites, file_name, line):
    """Index of the first site whose frames include file_name:line, or None."""
    for i, site in enumerate(sites):
        if any(os.path.basename(str(f.get("file", ""))) == file_name and f.get("line") == line
               for f in site.get("frames", [])):
            return i
    return None


SAVED_OOM_TOP = 5
MAX_EXAMPLE_BYTES = 200 * 1000


def check_saved_oom(c, summary, oom, truth, trace_path):
    c.check("trace complete (not truncated)", False, summary.get("trace", {}).get("truncated"))
    size = os.path.getsize(trace_path)
    c.check("trace size bytes (committed as an example)", f"< {MAX_EXAMPLE_BYTES}", size, size < MAX_EXAMPLE_BYTES)
    c.check("both allocations failed", [True, True], [truth["first_failed"], truth["second_failed"]])
    ooms = oom_list(oom)
    c.check("OOMs in memtrace oom --json", 2, len(ooms))
    if not ooms:
        return
    second = ooms[-1]
    c.check("second OOM requested bytes", truth["second_request_bytes"], second.get("requested_bytes"))
    sites = second.get("live_call_sites", [])
    name, line = os.path.basename(truth["held_file"]), truth["held_line"]
    rank = site_rank(sites, name, line)
    listed = ", ".join(f"{s.get('bytes')} B at "
                       + (next((frame_text(f) for f in s.get("frames", []) if str(f.get("file", "")).endswith(".py")),
                               "no Python frame")) for s in sites[:SAVED_OOM_TOP])
    c.check(f"held tensors' site among the top {SAVED_OOM_TOP} live call sites", f"{name}:{line}",
            f"rank {rank + 1}" if rank is not None else f"absent ({listed or 'no sites'})",
            rank is not None and rank < SAVED_OOM_TOP)
    # The held tensors may be listed under more than one stack (their native frames can differ): together the
    # sites through that line hold exactly what the function allocated.
    held = [s for s in sites if site_rank([s], name, line) is not None]
    c.check("bytes live through that line", truth["held_bytes"], sum(s.get("bytes", 0) for s in held))
    c.check("allocations live through that line", truth["held_count"], sum(s.get("count", 0) for s in held))
    c.info("sites through that line", f"{len(held)} of the {second.get('live_call_site_count')} live call sites "
                                      f"({len(sites)} listed)")
    # The held tensors are over 80% of the device (torch_saved_oom.py leaves 10 to 18 GiB of ~140 GiB free).
    causes = causes_of(second)
    c.check("second OOM diagnoses include live_tensors", "live_tensors in the list", ", ".join(causes) or "none",
            "live_tensors" in causes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["train_leak", "program", "cupy", "jax", "dataloader", "profiler", "killed",
                                         "memory_model", "ipc_child", "torch_checkpoints", "jax_stats", "oom_other",
                                         "saved_oom"])
    parser.add_argument("name")
    parser.add_argument("--summary", required=True)
    parser.add_argument("--leaks", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--truth")
    parser.add_argument("--expected")
    parser.add_argument("--expect-backend", help="train_leak: torch.cuda.get_allocator_backend() the run must use")
    parser.add_argument("--plain", help="dataloader, profiler: the side file of the run without memtrace")
    parser.add_argument("--trace-dir", help="dataloader: the directory MEMTRACE_OUTPUT pointed into")
    parser.add_argument("--output", help="profiler: stdout + stderr of the run with memtrace")
    parser.add_argument("--plain-output", help="profiler: stdout + stderr of the run without memtrace")
    parser.add_argument("--progress", help="killed: train_until_killed.py's progress file")
    parser.add_argument("--start", help="killed: train_until_killed.py's start file")
    parser.add_argument("--kill-time", type=float, help="killed: when SIGKILL was sent, Unix time in seconds")
    parser.add_argument("--flush-ms", type=int, help="killed: MEMTRACE_FLUSH_MS of the run")
    parser.add_argument("--pid", type=int, help="killed: the pid of the `memtrace run` gpu-check started")
    parser.add_argument("--exit-status", type=int, help="killed: the status gpu-check's wait returned")
    parser.add_argument("--min-steps", type=int, help="killed: steps gpu-check waited for before the kill")
    parser.add_argument("--signal", type=int, default=9, help="killed: the signal sent (9: SIGKILL, 15: SIGTERM)")
    parser.add_argument("--timeline", help="memory_model, torch_checkpoints, jax_stats: `memtrace timeline --json`")
    parser.add_argument("--oom", help="oom_other, saved_oom: `memtrace oom --json`")
    parser.add_argument("--holder", help="oom_other: gpu_holder.py's ready file")
    args = parser.parse_args()

    c = Checker(args.name)
    summary = load_json(args.summary, "memtrace summary --json output")
    leaks = leak_list(load_json(args.leaks, "memtrace leaks --json output"))
    if args.kind == "program":
        check_program(c, summary, leaks, load_json(args.expected, "the program's expected figures"), args.trace)
    elif args.kind == "train_leak":
        check_train_leak(c, summary, leaks, load_json(args.truth, "train_leak.py's side file"), args.trace,
                         args.expect_backend)
    elif args.kind == "memory_model":
        check_memory_model(c, summary, load_json(args.timeline, "memtrace timeline --json output"),
                           load_json(args.truth, "memory_model's side file"), args.trace)
    elif args.kind == "ipc_child":
        check_ipc_child(c, summary, load_json(args.truth, "memory_model's IPC child side file"), args.trace)
    elif args.kind == "torch_checkpoints":
        check_torch_checkpoints(c, summary, load_json(args.timeline, "memtrace timeline --json output"),
                                load_json(args.truth, "torch_checkpoints.py's side file"), args.trace,
                                args.expect_backend)
    elif args.kind == "jax_stats":
        check_jax_stats(c, summary, load_json(args.timeline, "memtrace timeline --json output"),
                        load_json(args.truth, "jax_stats.py's side file"), args.trace)
    elif args.kind == "oom_other":
        check_oom_other(c, summary, load_json(args.oom, "memtrace oom --json output"),
                        load_json(args.truth, "oom_other_process.py's side file"),
                        load_json(args.holder, "gpu_holder.py's ready file"), args.trace)
    elif args.kind == "saved_oom":
        check_saved_oom(c, summary, load_json(args.oom, "memtrace oom --json output"),
                        load_json(args.truth, "torch_saved_oom.py's side file"), args.trace)
    elif args.kind == "cupy":
        check_cupy(c, summary, leaks, load_json(args.truth, "cupy_pool.py's side file"), args.trace)
    elif args.kind == "jax":
        check_jax(c, summary, leaks, load_json(args.truth, "jax_alloc.py's side file"), args.trace)
    elif args.kind == "dataloader":
        check_dataloader(c, summary, load_json(args.truth, "dataloader_job.py's side file"),
                         load_json(args.plain, "dataloader_job.py's side file without memtrace"), args.trace,
                         args.trace_dir)
    elif args.kind == "profiler":
        check_profiler(c, summary, load_json(args.truth, "profiler_job.py's side file"),
                       load_json(args.plain, "profiler_job.py's side file without memtrace"), args.output,
                       args.plain_output)
    else:
        check_killed(c, summary, leaks, load_json(args.start, "train_until_killed.py's start file"),
                     read_progress(args.progress), args.kill_time, args.flush_ms, args.pid, args.exit_status,
                     args.min_steps, args.signal)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
