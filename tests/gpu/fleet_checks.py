"""Compares `memtrace summary DIR --json` of tests/gpu/fleet_job.py's traces with the job's own figures; used by
scripts/gpu-check's `fleet` group.

    fleet_checks.py NAME --dir DIR --summary S.json

DIR is fleet_job.py's directory (launch.json, holder.json, rank-0.json, rank-1.json, child.json, traces/); S.json is
`memtrace summary DIR/traces --json` (the many-process document, docs/many-processes.md). Prints one
`check ...: ok|FAIL` line per check (as tests/gpu/checks.py); exit 1 when any failed, 2 when an input cannot be read.

What is compared, exactly where memtrace reports PyTorch's own layer:
  - the trace files: one per process that called CUDA (the two ranks and rank 0's spawned child), none from the
    DataLoader workers (forked, they never call CUDA), torchrun's agent, multiprocessing's resource tracker or the
    untraced holder;
  - per process on device 0: peak allocated == its torch.cuda.max_memory_allocated(), peak reserved ==
    max_memory_reserved(); rank, local rank, world size, pid, ppid;
  - the tree: the child under rank 0; the ranks' parent is torchrun's agent, not traced (null);
  - the ranks table: one row per rank with the same peaks, the worst rank (highest peak allocated, ties the lowest
    rank) and the spread;
  - wrong devices: none (one GPU: device 0 is both ranks' device; the rule must not misfire on the stray line),
    and rank 1's first allocation on device 0 names the stray line;
  - leaks: rank 1's leak line holds STEPS x LEAK_BYTES in STEPS allocations (= its memory_allocated() at the end),
    rank 0 has nothing there;
  - the GPU: one, used by the three processes; untraced memory >= the holder's 1 GiB, the holder's pid named, no
    traced pid named; each rank's NVML list names the holder and the other rank.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checker, load_json  # noqa: E402


def device_of(process, ordinal):
    """The process entry's devices[] entry of `ordinal`, or {}."""
    return next((d for d in process.get("devices", []) if d.get("ordinal") == ordinal), {})


def bytes_of(moment):
    """A {"bytes", "unix_ns"} figure's bytes (None when absent)."""
    return moment.get("bytes") if isinstance(moment, dict) else None


def check_files(c, d, ranks, child, launch):
    expected = sorted(f"fleet-{pid}.mtrace" for pid in [r["pid"] for r in ranks] + [child["pid"]])
    files = sorted(os.listdir(os.path.join(d, "traces")))
    c.check("trace files (the ranks and rank 0's spawned child only)", expected, files)
    workers = sorted(set(p for r in ranks for p in r["worker_pids"]))
    c.check("DataLoader workers made the samples", f"{2 * len(ranks)} distinct worker pids", len(workers),
            len(workers) >= 2 * len(ranks) and not set(workers) & {r["pid"] for r in ranks})
    traced_workers = [p for p in workers if f"fleet-{p}.mtrace" in files]
    c.check("DataLoader workers (no CUDA) left no trace", [], traced_workers)
    c.check("no trace of torchrun's agent", False, f"fleet-{launch['agent_pid']}.mtrace" in files)
    c.check("no trace of the untraced holder", False, f"fleet-{launch['holder']['pid']}.mtrace" in files)


def check_process(c, what, process, truth):
    c.check(f"{what} pid", truth["pid"], process.get("pid"))
    c.check(f"{what} ppid", truth["ppid"], process.get("ppid"))
    dev = device_of(process, 0)
    c.check(f"{what} devices used", [0], [d.get("ordinal") for d in process.get("devices", [])])
    c.check(f"{what} peak allocated == torch.cuda.max_memory_allocated()", truth["max_memory_allocated_bytes"],
            bytes_of(dev.get("peak_allocated")))
    c.check(f"{what} peak reserved == torch.cuda.max_memory_reserved()", truth["max_memory_reserved_bytes"],
            bytes_of(dev.get("peak_reserved")))
    c.info(f"{what} at its end", f"torch.cuda.memory_allocated() {truth['memory_allocated_bytes']}, "
                                 f"memory_reserved() {truth['memory_reserved_bytes']}; memtrace final (after "
                                 f"interpreter teardown) allocated {dev.get('final_allocated_bytes')}, reserved "
                                 f"{dev.get('final_reserved_bytes')}")


def check_ranks(c, doc, index, ranks):
    table = doc.get("ranks") or {}
    rows = table.get("rows", [])
    c.check("rank rows", [0, 1], [r.get("rank") for r in rows])
    peaks = {}
    for row in rows:
        truth = next((r for r in ranks if r["rank"] == row.get("rank")), None)
        if truth is None:
            continue
        peaks[truth["rank"]] = truth["max_memory_allocated_bytes"]
        c.check(f"rank {truth['rank']} row process", index[truth["pid"]], row.get("process"))
        c.check(f"rank {truth['rank']} row ordinal", 0, row.get("ordinal"))
        c.check(f"rank {truth['rank']} row peak allocated", truth["max_memory_allocated_bytes"],
                bytes_of(row.get("peak_allocated")))
        c.check(f"rank {truth['rank']} row peak reserved", truth["max_memory_reserved_bytes"],
                bytes_of(row.get("peak_reserved")))
    if len(peaks) == 2:
        worst = max(sorted(peaks), key=lambda r: peaks[r])  # the first of the highest: ties go to the lowest rank
        c.check("worst rank", worst, table.get("worst_rank"))
        c.check("peak allocated spread", abs(peaks[0] - peaks[1]), table.get("peak_allocated_spread_bytes"))
        spread_reserved = abs(ranks[0]["max_memory_reserved_bytes"] - ranks[1]["max_memory_reserved_bytes"])
        c.check("peak reserved spread", spread_reserved, table.get("peak_reserved_spread_bytes"))


def check_leaks(c, doc, index, ranks):
    rank0, rank1 = ranks
    leak_site = f"fleet_job.py:{rank1['leak_line']} rank_main"  # a site as the reports name it: FILE:LINE FUNCTION
    want_bytes = rank1["steps"] * rank1["leak_bytes"]
    c.check("rank 1's own figure: memory_allocated() at its end == its leak", want_bytes,
            rank1["memory_allocated_bytes"])
    process1 = doc["processes"][index[rank1["pid"]]]
    site = next((l for l in process1.get("leaks", []) if l.get("site") == leak_site), {})
    c.check(f"rank 1 leak at {leak_site} bytes", want_bytes, site.get("bytes"))
    c.check(f"rank 1 leak at {leak_site} allocations", rank1["steps"], site.get("count"))
    process0 = doc["processes"][index[rank0["pid"]]]
    c.check(f"rank 0 leaks nothing at {leak_site}", [],
            [l for l in process0.get("leaks", []) if l.get("site") == leak_site])
    c.info("rank 0 leak candidates", [(l.get("site"), l.get("bytes")) for l in process0.get("leaks", [])])
    merged = next((l for l in doc.get("leaks", []) if l.get("site") == leak_site), {})
    c.check(f"merged leak at {leak_site}: processes", [index[rank1["pid"]]], merged.get("processes"))
    c.check(f"merged leak at {leak_site}: bytes", want_bytes, merged.get("bytes"))


def check_devices(c, doc, index, ranks, launch):
    c.check("wrong devices (one GPU: none, the stray line on device 0 is rank 1's own device)", [],
            doc.get("wrong_devices"))
    rank1 = ranks[1]
    first = device_of(doc["processes"][index[rank1["pid"]]], 0).get("first_allocation_site", "")
    want = f"fleet_job.py:{rank1['stray_line']} rank_main"
    c.check("rank 1's first allocation on device 0 is the stray line", want, first)

    gpus = doc.get("gpus", [])
    c.check("GPUs", 1, len(gpus))
    if not gpus:
        return
    gpu = gpus[0]
    c.check("GPU users", sorted(index.values()), sorted(u.get("process") for u in gpu.get("processes", [])))
    holder = launch["holder"]
    untraced = gpu.get("untraced") or {}
    c.check("untraced memory >= the holder's torch.empty", f">= {holder['held_bytes']}", untraced.get("bytes"),
            isinstance(untraced.get("bytes"), int) and untraced["bytes"] >= holder["held_bytes"])
    c.check("untraced pids name the holder", True, holder["pid"] in untraced.get("pids", []))
    c.check("untraced pids name no traced process", [], sorted(set(untraced.get("pids", [])) & set(index)))
    c.info("untraced", f"{untraced.get('bytes')} B seen by process {untraced.get('seen_by')}, pids "
                       f"{untraced.get('pids')}; GPU total {gpu.get('total_bytes')} B")
    for r in ranks:
        pids = device_of(doc["processes"][index[r["pid"]]], 0).get("nvml_other_pids", [])
        other = ranks[1 - r["rank"]]["pid"]
        c.check(f"rank {r['rank']}'s NVML list names the holder and rank {1 - r['rank']}", True,
                holder["pid"] in pids and other in pids)
        c.check(f"rank {r['rank']}'s NVML list is ascending without itself", True,
                pids == sorted(set(pids)) and r["pid"] not in pids)
    combined = gpu.get("combined") or {}
    peak = combined.get("peak_allocated") or {}
    own_peaks = [bytes_of(u.get("peak_allocated")) or 0 for u in gpu.get("processes", [])]
    c.check("combined peak allocated between the largest own peak and the sum of the peaks",
            f"[{max(own_peaks, default=0)}, {sum(own_peaks)}]", peak.get("allocated_bytes"),
            isinstance(peak.get("allocated_bytes"), int) and
            max(own_peaks, default=0) <= peak["allocated_bytes"] <= sum(own_peaks))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--summary", required=True)
    args = parser.parse_args()
    c = Checker(args.name)
    d = args.dir
    launch = load_json(os.path.join(d, "launch.json"), "fleet_job.py's launch file")
    ranks = [load_json(os.path.join(d, f"rank-{r}.json"), f"rank {r}'s figures") for r in (0, 1)]
    child = load_json(os.path.join(d, "child.json"), "the spawned child's figures")
    doc = load_json(args.summary, "memtrace summary --json")
    c.check("torchrun exit status", 0, launch["returncode"])
    c.info("job", f"{launch['seconds']:.1f} s; holder pid {launch['holder']['pid']}, agent pid {launch['agent_pid']}, "
                  f"ranks {[r['pid'] for r in ranks]}, child {child['pid']}")
    check_files(c, d, ranks, child, launch)

    processes = doc.get("processes", [])
    index = {p.get("pid"): i for i, p in enumerate(processes)}
    want_pids = sorted([r["pid"] for r in ranks] + [child["pid"]])
    c.check("processes", want_pids, sorted(index))
    if sorted(index) != want_pids:
        sys.exit(1)
    for r in ranks:
        process = processes[index[r["pid"]]]
        check_process(c, f"rank {r['rank']}", process, r)
        for key in ("rank", "local_rank", "world_size"):
            c.check(f"rank {r['rank']} {key}", r[key], process.get(key))
        c.check(f"rank {r['rank']} parent (torchrun's agent, untraced)", None, doc.get("processes")[index[r["pid"]]]
                .get("parent"))
        c.check(f"rank {r['rank']} ppid is torchrun's agent", launch["agent_pid"], r["ppid"])
    check_process(c, "spawned child", processes[index[child["pid"]]], child)
    c.check("spawned child of rank 0", ranks[0]["pid"], child["ppid"])
    c.check("spawned child's parent", index[ranks[0]["pid"]], processes[index[child["pid"]]].get("parent"))
    c.check("spawned child exit code", 0, ranks[0].get("child_exitcode"))
    check_ranks(c, doc, index, ranks)
    check_leaks(c, doc, index, ranks)
    check_devices(c, doc, index, ranks, launch)
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
