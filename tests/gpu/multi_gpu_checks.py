"""Compares memtrace's figures of tests/gpu/multi_gpu_job.py's jobs with the job's own; used by scripts/gpu-check's
`multi_gpu` group (`scripts/gpu-check --multi-gpu`).

    multi_gpu_checks.py job NAME --dir DIR --summary S.json --memtrace MEMTRACE     a torchrun variant
    multi_gpu_checks.py peer NAME --dir DIR --summary S.json                        the two-GPU process
    multi_gpu_checks.py program NAME --expected E.json --summary S.json             tests/gpu/two_device_async.cu

S.json is `memtrace summary --json` of the job's traces (the many-process document, docs/many-processes.md, for a
job; one trace's summary for `peer` and `program`). Prints one `check ...: ok|FAIL` line per check (as
tests/gpu/checks.py); exit 1 when any failed, 2 when an input cannot be read.

What is compared, for every torchrun variant:
  - one trace file per rank, none from torchrun's agent;
  - per rank on its device (cuda:LOCAL_RANK): peak allocated == torch.cuda.max_memory_allocated(), peak reserved ==
    max_memory_reserved(); the GPU by UUID;
  - per GPU (gpus[]): the rank whose device it is, listed with those peaks; the ranks table;
  - NCCL's memory: at each rank's peak, `outside_allocator.nccl` of its device's breakdown (what driver-layer
    allocations with a frame in libnccl hold) is above 0;
and per variant:
  - ddp: no wrong device;
  - no_set_device: ranks 1..N-1 named as WRONG DEVICE on device 0 (local ordinal LOCAL_RANK), first at the stray
    line; rank 0 not named; each such rank's peak on device 0 == its own torch.cuda.max_memory_allocated(0);
  - fsdp: each rank's breakdown at its peak: parameters == its parameter shards' blocks, optimizer state == its Adam
    state's blocks (multi_gpu_job.py's block_bytes), both the sharded sizes (about 1/N of the whole).
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checker, load_json  # noqa: E402


def bytes_of(moment):
    return moment.get("bytes") if isinstance(moment, dict) else None


def device_of(process, ordinal):
    return next((d for d in process.get("devices", []) if d.get("ordinal") == ordinal), {})


def trace_summary(memtrace, trace):
    """`memtrace summary TRACE --json` of one rank's trace (its devices' peak breakdowns), or {}."""
    proc = subprocess.run([memtrace, "summary", trace, "--json"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return {}
    return json.loads(proc.stdout)


def breakdown_of(summary, ordinal):
    device = next((d for d in summary.get("devices", []) if d.get("device") == ordinal), {})
    return device.get("peak_breakdown") or {}


def check_rank(c, doc, index, r):
    what = f"rank {r['rank']}"
    process = doc["processes"][index[r["pid"]]]
    for key in ("rank", "local_rank", "world_size"):
        c.check(f"{what} {key}", r[key], process.get(key))
    dev = device_of(process, r["local_rank"])
    c.check(f"{what} peak allocated on cuda:{r['local_rank']} == torch.cuda.max_memory_allocated()",
            r["max_memory_allocated_bytes"], bytes_of(dev.get("peak_allocated")))
    c.check(f"{what} peak reserved on cuda:{r['local_rank']} == torch.cuda.max_memory_reserved()",
            r["max_memory_reserved_bytes"], bytes_of(dev.get("peak_reserved")))
    c.check(f"{what} GPU of cuda:{r['local_rank']}", r["uuid"], dev.get("gpu"))


def check_gpus(c, doc, index, ranks):
    gpus = {g.get("gpu"): g for g in doc.get("gpus", [])}
    for r in ranks:
        gpu = gpus.get(r["uuid"], {})
        users = {u.get("process"): u for u in gpu.get("processes", [])}
        owner = users.get(index[r["pid"]], {})
        c.check(f"GPU {r['uuid']} lists rank {r['rank']}", True, bool(owner))
        c.check(f"GPU {r['uuid']} rank {r['rank']} peak allocated", r["max_memory_allocated_bytes"],
                bytes_of(owner.get("peak_allocated")))
        c.check(f"GPU {r['uuid']} rank {r['rank']} peak reserved", r["max_memory_reserved_bytes"],
                bytes_of(owner.get("peak_reserved")))
    rows = (doc.get("ranks") or {}).get("rows", [])
    c.check("rank rows", [r["rank"] for r in ranks], [row.get("rank") for row in rows])
    for row in rows:
        r = next((x for x in ranks if x["rank"] == row.get("rank")), None)
        if r is None:
            continue
        c.check(f"rank {r['rank']} row ordinal", r["local_rank"], row.get("ordinal"))
        c.check(f"rank {r['rank']} row gpu", r["uuid"], row.get("gpu"))
        c.check(f"rank {r['rank']} row peak allocated", r["max_memory_allocated_bytes"],
                bytes_of(row.get("peak_allocated")))


def check_nccl(c, summaries, ranks):
    for r in ranks:
        outside = breakdown_of(summaries[r["pid"]], r["local_rank"]).get("outside_allocator") or {}
        nccl = (outside.get("nccl") or {}).get("bytes")
        c.check(f"rank {r['rank']} NCCL's memory at its peak (outside PyTorch's allocator, by layer)", "> 0 B", nccl,
                isinstance(nccl, int) and nccl > 0)
        c.info(f"rank {r['rank']} outside PyTorch's allocator at its peak", outside)


def check_wrong_devices(c, doc, index, ranks, variant):
    wrong = doc.get("wrong_devices", [])
    if variant != "no_set_device":
        c.check("wrong devices", [], wrong)
        return
    want = sorted(index[r["pid"]] for r in ranks if r["local_rank"] != 0)
    c.check("WRONG DEVICE processes (ranks 1..N-1)", want, sorted(w.get("process") for w in wrong))
    for r in ranks:
        if r["local_rank"] == 0:
            continue
        w = next((x for x in wrong if x.get("process") == index[r["pid"]]), {})
        c.check(f"rank {r['rank']} wrong device ordinal", 0, w.get("ordinal"))
        c.check(f"rank {r['rank']} local ordinal", r["local_rank"], w.get("local_ordinal"))
        c.check(f"rank {r['rank']} wrong device GPU", r["device0"]["uuid"], w.get("gpu"))
        c.check(f"rank {r['rank']} first allocation there is the stray line",
                f"multi_gpu_job.py:{r['stray_line']} rank_main", w.get("first_allocation_site"))
        c.check(f"rank {r['rank']} peak allocated there == its torch.cuda.max_memory_allocated(0)",
                r["device0"]["max_memory_allocated_bytes"], w.get("peak_allocated_bytes"))


def check_fsdp(c, summaries, ranks):
    for r in ranks:
        breakdown = breakdown_of(summaries[r["pid"]], r["local_rank"])
        rows = breakdown.get("rows") or {}
        c.check(f"rank {r['rank']} breakdown phases found", True, breakdown.get("phases_source") not in (None, "none"))
        c.check(f"rank {r['rank']} parameters at its peak == its parameter shards ({r['world_size']} ranks)",
                r["parameter_shard_bytes"], (rows.get("parameters") or {}).get("bytes"))
        c.check(f"rank {r['rank']} optimizer state at its peak == its Adam state shards",
                r["optimizer_state_bytes"], (rows.get("optimizer_state") or {}).get("bytes"))
        c.info(f"rank {r['rank']} whole model", f"{r['parameter_full_bytes']} B of parameters unsharded")


def check_job(c, args):
    d = args.dir
    launch = load_json(os.path.join(d, "launch.json"), "multi_gpu_job.py's launch file")
    c.check("torchrun exit status", 0, launch["returncode"])
    nproc = launch["nproc"]
    ranks = [load_json(os.path.join(d, f"rank-{r}.json"), f"rank {r}'s figures") for r in range(nproc)]
    doc = load_json(args.summary, "memtrace summary --json")
    files = sorted(os.listdir(os.path.join(d, "traces")))
    c.check("trace files (one per rank)", sorted(f"multi-{r['pid']}.mtrace" for r in ranks), files)
    index = {p.get("pid"): i for i, p in enumerate(doc.get("processes", []))}
    c.check("processes", sorted(r["pid"] for r in ranks), sorted(index))
    if sorted(index) != sorted(r["pid"] for r in ranks):
        return
    summaries = {r["pid"]: trace_summary(args.memtrace, os.path.join(d, "traces", f"multi-{r['pid']}.mtrace"))
                 for r in ranks}
    for r in ranks:
        check_rank(c, doc, index, r)
    check_gpus(c, doc, index, ranks)
    check_nccl(c, summaries, ranks)
    check_wrong_devices(c, doc, index, ranks, launch["variant"])
    if launch["variant"] == "fsdp":
        check_fsdp(c, summaries, ranks)
    c.info("losses", [r["loss"] for r in ranks])


def summary_device(summary, ordinal):
    return next((d for d in summary.get("devices", []) if d.get("device") == ordinal), {})


def check_peer(c, args):
    truth = load_json(os.path.join(args.dir, "peer.json"), "multi_gpu_job.py peer's figures")
    summary = load_json(args.summary, "memtrace summary --json")
    c.check("peer access between cuda:0 and cuda:1", True, truth["can_access_peer"])
    c.check("allocator configuration", "expandable_segments:True", truth["conf"])
    for ordinal in (0, 1):
        want = truth["devices"][str(ordinal)]
        dev = summary_device(summary, ordinal)
        c.check(f"cuda:{ordinal} peak allocated == torch.cuda.max_memory_allocated()",
                want["max_memory_allocated_bytes"], dev.get("peak_allocated_bytes"))
        c.check(f"cuda:{ordinal} peak reserved == torch.cuda.max_memory_reserved() (peer mappings not counted again)",
                want["max_memory_reserved_bytes"], dev.get("peak_reserved_bytes"))
        c.info(f"cuda:{ordinal} at the end", f"torch allocated {want['memory_allocated_bytes']}, reserved "
                                             f"{want['memory_reserved_bytes']}; memtrace final allocated "
                                             f"{dev.get('final_allocated_bytes')}, reserved "
                                             f"{dev.get('final_reserved_bytes')}")


def check_program(c, args):
    """two_device_async.cu: its last JSON line gives, per device, the figures worked out by hand."""
    expected = load_json(args.expected, "the program's expected figures")
    summary = load_json(args.summary, "memtrace summary --json")
    present = sorted(d.get("device") for d in summary.get("devices", []))
    c.check("devices with memory", sorted(int(k) for k in expected["devices"]), present)
    for ordinal, figures in expected["devices"].items():
        dev = summary_device(summary, int(ordinal))
        for key, value in figures.items():
            c.check(f"device {ordinal} {key}", value, dev.get(key))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["job", "peer", "program"])
    parser.add_argument("name")
    parser.add_argument("--dir")
    parser.add_argument("--summary", required=True)
    parser.add_argument("--memtrace")
    parser.add_argument("--expected")
    args = parser.parse_args()
    c = Checker(args.name)
    {"job": check_job, "peer": check_peer, "program": check_program}[args.kind](c, args)
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
