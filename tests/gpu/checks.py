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
                              --kill-time UNIX_S --flush-ms MS --pid PID --exit-status RC

S.json / L.json are `memtrace summary --json` / `memtrace leaks --json` (keys documented in README.md).
T.json is the side file train_leak.py, cupy_pool.py, jax_alloc.py, dataloader_job.py or profiler_job.py wrote (P.json:
the same job's side file from its run without memtrace); E.json is the JSON line an nvcc program printed.
PROGRESS and START.json are train_until_killed.py's files; UNIX_S is when gpu-check sent SIGKILL to it.
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


def check_killed(c, summary, leaks, start, progress, kill_time_s, flush_ms, pid, exit_status, min_steps):
    # `memtrace run` replaces itself with the command, so the pid gpu-check started and killed is Python's.
    c.check("pid of memtrace run == pid of the python process", pid, start["pid"])
    c.check("exit status of the killed job (128 + SIGKILL)", 128 + 9, exit_status)
    completed = progress[-1][0] if progress else 0
    c.check("steps completed before the kill", f">= {min_steps}", completed, completed >= min_steps)

    trace = summary.get("trace", {})
    how = end_how(trace)
    c.check("trace end record", "none (cut off)", how or "none (cut off)", how is None)
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
    cutoff_s = kill_time_s - 2 * flush_ms / 1000
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
                       f"at least 2 x {flush_ms} ms before the kill")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["train_leak", "program", "cupy", "jax", "dataloader", "profiler", "killed"])
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
                     args.min_steps)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
