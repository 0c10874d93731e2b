"""libmemtrace.so as the NVTX injection library (docs/tracing.md, "NVTX ranges"): the ranges of nvtx_ranges.cc arrive
as RangeName / RangeEvent records, in file order among the events; a second injection chained behind it
(MEMTRACE_NVTX_CHAIN) sees every call and its answers reach the job; `memtrace run` sets both variables.

nvtx_ranges.cc, by hand: before its first CUDA call a push "before-cuda", a mark and a pop (not recorded: the trace
has not started); then alloc 1 MiB (event 0), push "step", push "forward", alloc 2 MiB, alloc 4 MiB, pop, push
"backwardé" (wide), free (4 MiB), pop, pop, start "optimizer" (Ex form), alloc 8 MiB, end, mark "ctl\\x1b[2J",
push "step" (its name written once), free (2 MiB), pop, push 300 x's (255 kept), free (8 MiB), pop, pop (of
nothing: recorded, and answered -1). 7 events.
Alone the job gets push depths 0 (before-cuda), 0, 1, 1, 0, 0, range id 1 and last pops 0 + -1 = -1; chained, the chain's answers:
40, 40, 41, 41, 40, 40, range id 9000 and pops 40 + -1 = 39, and the chain counts pushA 5 pushW 1 pop 7 startEx 1 end 1 markA 2.
"""
import os
import subprocess

import e2e_lib

LONG = "x" * 255
EXPECTED = [
    "ALLOC 1048576",
    "PUSH step", "PUSH forward", "ALLOC 2097152", "ALLOC 4194304", "POP",
    "PUSH backward\u00e9", "FREE", "POP", "POP",
    "START optimizer id", "ALLOC 8388608", "END id",
    "MARK ctl\x1b[2J",
    "PUSH step", "FREE", "POP",
    "PUSH " + LONG, "FREE", "POP", "POP",
]
ALONE = ["push depth 0", "push depth 0", "push depth 1", "push depth 1", "range id 1", "push depth 0",
         "push depth 0", "pop of nothing -1"]
CHAINED = ["push depth 40", "push depth 40", "push depth 41", "push depth 41", "range id 9000", "push depth 40",
           "push depth 40", "pop of nothing 39"]
CHAIN_REPORT = "pushA 5 pushW 1 pop 7 startEx 1 end 1 markA 2"

case = e2e_lib.Case()
program = case.program("nvtx_ranges")
chain = os.path.join(case.args.program_dir, "libe2e_nvtx_chain.so")


def describe(trace):
    """The trace's events and range events in file order, names resolved; range ids as "id" when they match."""
    names, lines, start_ids = {}, [], []
    for r in case.dump_records(trace):
        if r["record"] == "range_name":
            names[r["id"]] = r["name"]
        elif r["record"] == "event":
            lines.append(f"{r['kind']} {r['size']}" if r["kind"] == "ALLOC" else r["kind"])
        elif r["record"] == "range_event":
            line = r["kind"] + (" " + names.get(r["name_id"], "?") if r["name_id"] else "")
            if r["kind"] == "START":
                start_ids.append(r["range_id"])
            if r["kind"] in ("START", "END"):
                line += " id" if r["range_id"] == start_ids[-1] else f" {r['range_id']}"
            lines.append(line)
    return lines


def answers(stdout):
    return [line for line in stdout.splitlines() if not line.startswith("line ")]


def fresh_out_dir():
    for name in os.listdir(case.args.out_dir):
        os.remove(os.path.join(case.args.out_dir, name))


# Alone.
stdout, trace = case.run_traced([program], {"NVTX_INJECTION64_PATH": case.args.preload})
case.check("alone: the job's answers", ALONE, answers(stdout))
case.check("alone: events and ranges in file order", EXPECTED, describe(trace))

# Chained behind libmemtrace.so, set by hand.
fresh_out_dir()
report = os.path.join(case.args.out_dir, "..", "nvtx-chain-report")
stdout, trace = case.run_traced([program], {"NVTX_INJECTION64_PATH": case.args.preload, "MEMTRACE_NVTX_CHAIN": chain,
                                            "E2E_NVTX_CHAIN_REPORT": report})
case.check("chained: the job gets the chain's answers", CHAINED, answers(stdout))
case.check("chained: the chain saw every call", [CHAIN_REPORT], open(report).read().splitlines())
case.check("chained: events and ranges in file order", EXPECTED, describe(trace))

# The chain alone, without memtrace, sees the same calls (the before-cuda ones included).
os.remove(report)
env = dict(os.environ, LD_LIBRARY_PATH=case.args.fake_lib_dir, NVTX_INJECTION64_PATH=chain,
           E2E_NVTX_CHAIN_REPORT=report)
env.pop("LD_PRELOAD", None)
proc = subprocess.run([program], env=env, capture_output=True, text=True, timeout=60)
case.check("chain alone: the job's answers", CHAINED, answers(proc.stdout))
case.check("chain alone: its counts", [CHAIN_REPORT], open(report).read().splitlines())

# `memtrace run` with the chain already in the environment: the tracer is the injection, the chain behind it.
fresh_out_dir()
os.remove(report)
trace = os.path.join(case.args.out_dir, "run.mtrace")
proc = subprocess.run([case.args.memtrace, "run", "-o", trace, "--", program],
                      env=dict(env, NVTX_INJECTION64_PATH=chain), capture_output=True, text=True, timeout=60)
case.check("memtrace run: exit status", 0, proc.returncode)
case.check("memtrace run: the job gets the chain's answers", CHAINED, answers(proc.stdout))
case.check("memtrace run: the chain saw every call", [CHAIN_REPORT], open(report).read().splitlines())
case.check("memtrace run: events and ranges in file order", EXPECTED, describe(trace))
case.finish()
