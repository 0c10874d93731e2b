#!/usr/bin/env python3
"""Writes report data (the JSON `memtrace report` embeds; docs/report.md) for the page's browser test.

  make_report_data.py sample OUT.json         the committed fixture tests/report/sample_report_data.json: a
                                              12 s training job on two devices, simulated event by event and
                                              downsampled as the contract says (min/max per bin, the finest
                                              level exact), with iterations, phases, an OOM, leaks, a trap
  make_report_data.py large OUT.json BINS     a stress case: one device, a random walk over BINS finest bins
                                              (levels of BINS/100, BINS/10 and BINS bins), 40 sites, 2,000
                                              iterations, 20,000 samples per sampled series

  make_report_data.py fleet OUT.json          the committed fixture tests/report/sample_fleet_data.json: the
                                              data of many processes (two ranks sharing a GPU, a DataLoader
                                              worker, a wrong device, untraced memory, a leak)

The page must draw them all; the fixture carries text that must stay text ("</script>", "<img ...>").
"""
import json
import random
import sys

GiB = 1 << 30
MiB = 1 << 20
NS = 1_000_000_000


def levels_from_changes(changes, end_ns, bins):
    """changes: [(t_ns, allocated, reserved, driver)] ascending. One level per bin width in `bins` (coarsest
    first), each bin holding the min and max of every total inside it (the value at the bin's start included),
    then the exact level (bin_ns 0, one point per change)."""
    levels = []
    for bin_ns in bins:
        n = end_ns // bin_ns + 1
        lo = [[None] * n for _ in range(3)]
        hi = [[None] * n for _ in range(3)]
        cur = (0, 0, 0)
        j = 0
        for k in range(n):
            start = k * bin_ns
            stop = start + bin_ns
            vals = [cur]
            while j < len(changes) and changes[j][0] < stop:
                cur = changes[j][1:]
                vals.append(cur)
                j += 1
            for s in range(3):
                lo[s][k] = min(v[s] for v in vals)
                hi[s][k] = max(v[s] for v in vals)
        keep = [k for k in range(n) if hi[2][k] > 0 or hi[1][k] > 0]
        level = {"bin_ns": bin_ns, "t_ns": [k * bin_ns for k in keep]}
        for s, name in enumerate(("allocated", "reserved", "driver")):
            level[name + "_min"] = [lo[s][k] for k in keep]
            level[name + "_max"] = [hi[s][k] for k in keep]
        levels.append(level)
    exact = {"bin_ns": 0, "t_ns": [c[0] for c in changes]}
    for s, name in enumerate(("allocated", "reserved", "driver")):
        exact[name + "_min"] = [c[1 + s] for c in changes]
        exact[name + "_max"] = [c[1 + s] for c in changes]
    levels.append(exact)
    return levels


class Device:
    """Replays allocations and frees by site; the caching allocator reserves 2 GiB segments and keeps them."""

    def __init__(self, index, sites):
        self.index = index
        self.sites = sites
        self.live = {}  # id -> (site, bytes)
        self.next_id = 0
        self.allocated = 0
        self.reserved = 0
        self.driver = 0
        self.changes = []
        self.by_site = [0] * len(sites)
        self.site_history = []  # (t_ns, by_site copy) after each change
        self.peak = {"allocated": None, "reserved": None, "driver": None}
        self.flame_live = None
        self.site_bytes_at_peak = []
        self.events = 0

    def alloc(self, t, site, size):
        self.next_id += 1
        self.live[self.next_id] = (site, size)
        self.allocated += size
        self.by_site[site] += size
        while self.reserved < self.allocated:
            self.reserved += 2 * GiB
            self.driver = self.reserved + 512 * MiB
        self._changed(t)
        return self.next_id

    def free(self, t, aid):
        site, size = self.live.pop(aid)
        self.allocated -= size
        self.by_site[site] -= size
        self._changed(t)

    def _changed(self, t):
        self.events += 1
        self.changes.append((t, self.allocated, self.reserved, self.driver))
        self.site_history.append((t, list(self.by_site)))
        for name, value in (("allocated", self.allocated), ("reserved", self.reserved), ("driver", self.driver)):
            p = self.peak[name]
            if p is None or value > p["bytes"]:
                self.peak[name] = {"bytes": value, "time_ns": t, "event": self.events}
                if name == "allocated":
                    self.flame_live = list(self.live.values())
                    self.site_bytes_at_peak = list(self.by_site)

    def site_bytes_at_bin_ends(self, level0):
        """Live bytes by site at the end of each bin of the coarsest level."""
        out = [[0] * len(level0["t_ns"]) for _ in self.sites]
        j = 0
        cur = [0] * len(self.sites)
        for k, t in enumerate(level0["t_ns"]):
            end = t + level0["bin_ns"]
            while j < len(self.site_history) and self.site_history[j][0] < end:
                cur = self.site_history[j][1]
                j += 1
            for s in range(len(self.sites)):
                out[s][k] = cur[s]
        return out

    def flame(self):
        root = {"name": "live at peak allocated", "value": 0, "children": []}
        for site, size in self.flame_live:
            node = root
            node["value"] += size
            for frame in self.sites[site]["stack"]:
                child = next((c for c in node["children"] if c["name"] == frame), None)
                if child is None:
                    child = {"name": frame, "value": 0, "children": []}
                    node["children"].append(child)
                child["value"] += size
                node = child
        return root


def site(label, *stack):
    return {"label": label, "stack": list(stack)}


SITES = [
    site("train.py:41 build_model", "train.py:120 <module>", "train.py:98 main", "train.py:41 build_model",
         "torch/nn/modules/module.py:1370 Module.to.<locals>.convert", "native: PyTorch allocator"),
    site("train.py:70 train_step", "train.py:120 <module>", "train.py:104 main", "train.py:70 train_step",
         "model.py:33 Block.forward", "torch/nn/modules/linear.py:125 Linear.forward",
         "native: aten::mm -> PyTorch allocator"),
    site("train.py:70 train_step", "train.py:120 <module>", "train.py:104 main", "train.py:70 train_step",
         "model.py:36 Block.forward", "torch/nn/functional.py:1704 gelu", "native: PyTorch allocator"),
    site("train.py:72 train_step", "train.py:120 <module>", "train.py:104 main", "train.py:72 train_step",
         "torch/_tensor.py:626 Tensor.backward", "native: autograd engine -> PyTorch allocator"),
    site("train.py:74 train_step", "train.py:120 <module>", "train.py:104 main", "train.py:74 train_step",
         "torch/optim/adam.py:166 Adam.step", "torch/optim/adam.py:118 Adam._init_group", "native: PyTorch allocator"),
    site("train.py:76 train_step", "train.py:120 <module>", "train.py:104 main", "train.py:76 train_step",
         "torch/nn/functional.py:3504 cross_entropy", "native: PyTorch allocator"),
    site("train.py:70 train_step", "train.py:120 <module>", "train.py:104 main", "train.py:70 train_step",
         "model.py:30 Block.forward", "native: aten::mm -> cuBLAS workspace"),
    site("eval.py:12 <lambda></script><img src=x>", "train.py:120 <module>", "train.py:110 main",
         "eval.py:12 <lambda></script><img src=x>", "native: PyTorch allocator"),
]


def sample():
    random.seed(19)
    d0 = Device(0, SITES)
    d1 = Device(1, SITES[:2])
    t = 50_000_000
    params = [d0.alloc(t + i * 20_000_000, 0, 256 * MiB) for i in range(16)]  # 4 GiB of parameters
    for i in range(8):
        d1.alloc(t + i * 30_000_000, 0, 512 * MiB)
    spans = []
    grads = []
    optim = []
    kept = []
    t = 1_500_000_000
    for it in range(1, 21):
        begin = t
        acts = []
        for k in range(60):  # forward: activations
            t += 3_000_000 + random.randrange(300_000)
            acts.append(d0.alloc(t, 1 + k % 2, (48 + random.randrange(64)) * MiB))
        ws = d0.alloc(t + 100_000, 6, 256 * MiB)
        d0.free(t + 900_000, ws)
        fwd_end = t + 1_000_000
        t = fwd_end
        for k, a in enumerate(reversed(acts)):  # backward: activations freed, gradients made once
            t += 3_000_000
            d0.free(t, a)
            if it == 1 and k % 4 == 0:
                grads.append(d0.alloc(t + 500_000, 3, 256 * MiB))
        bwd_end = t + 1_000_000
        t = bwd_end
        if it == 1:
            for k in range(32):
                t += 2_000_000
                optim.append(d0.alloc(t, 4, 256 * MiB))
        else:
            t += 60_000_000
        kept.append(d0.alloc(t + 1_000_000, 5, 64 * MiB))  # the loss kept per iteration: a leak
        opt_end = t + 2_000_000
        spans.append({"index": it, "begin_ns": begin, "end_ns": opt_end + 20_000_000, "phases": [
            {"phase": "forward", "begin_ns": begin, "end_ns": fwd_end},
            {"phase": "backward", "begin_ns": fwd_end, "end_ns": bwd_end},
            {"phase": "optimizer", "begin_ns": bwd_end, "end_ns": opt_end},
            {"phase": "other", "begin_ns": opt_end, "end_ns": opt_end + 20_000_000}]})
        t = opt_end + 20_000_000
        if it % 5 == 0:
            d1.alloc(t, 1, 256 * MiB)
    t += 100_000_000
    evals = [d0.alloc(t + k * 4_000_000, 7, 512 * MiB) for k in range(12)]
    oom_t = t + 60_000_000
    end_ns = oom_t + 200_000_000
    del params, grads, optim, evals

    devices = []
    for d, name, total, sampled in ((d0, "NVIDIA H200", 150_109_880_320, True), (d1, "NVIDIA H200", 150_109_880_320, False)):
        levels = levels_from_changes(d.changes, end_ns, (100_000_000, 10_000_000))
        sites = [{"label": s["label"], "stack": s["stack"]} for s in d.sites]
        dev = {"device": d.index, "name": name, "total_bytes": total,
               "timeline": {"levels": levels, "device_used": [], "process_used": [], "other_processes": [],
                            "peaks": d.peak},
               "sites": sites,
               "site_bytes": d.site_bytes_at_bin_ends(levels[0]),
               "other_site_bytes": [0] * len(levels[0]["t_ns"]),
               "site_bytes_at_peak": d.site_bytes_at_peak,
               "other_site_bytes_at_peak": 0,
               "flame_at_peak": d.flame(),
               "breakdown_at_peak": []}
        if sampled:
            tl = dev["timeline"]
            j = 0
            driver = 0
            for ts in range(100_000_000, end_ns, 100_000_000):
                while j < len(d.changes) and d.changes[j][0] <= ts:
                    driver = d.changes[j][3]
                    j += 1
                others = 6 * GiB if ts > 5 * NS else 0
                tl["process_used"].append([ts, driver + 518 * MiB])
                tl["other_processes"].append([ts, others])
                tl["device_used"].append([ts, driver + 518 * MiB + others])
            dev["breakdown_at_peak"] = [
                {"category": "parameters", "bytes": 4 * GiB}, {"category": "gradients", "bytes": 4 * GiB},
                {"category": "optimizer state", "bytes": 8 * GiB},
                {"category": "activations", "bytes": d.peak["allocated"]["bytes"] - 16 * GiB - 128 * MiB},
                {"category": "unclassified", "bytes": 128 * MiB}]
        devices.append(dev)
    command = 'python train.py --tag "</script><img src=x onerror=alert(1)>"'
    return {
        "format": 1,
        "trace": {"path": "examples/sample.mtrace", "command": command, "host": "gpu-node-7", "pid": 4242,
                  "duration_ns": end_ns, "events": d0.events + d1.events, "truncated": False,
                  "health": ["events read %d, complete, process ended normally, last event at %.3f s"
                             % (d0.events + d1.events, end_ns / NS),
                             "PyTorch allocator layer: seen",
                             "unknown frees 0, double frees 0, allocations at a live address 0, failed allocations 1"]},
        "devices": devices,
        "iterations": {"source": "python loop train.py:104 main", "spans": spans},
        "nvtx": [{"name": "epoch 0", "begin_ns": spans[0]["begin_ns"], "end_ns": spans[-1]["end_ns"], "depth": 0}],
        "ooms": [{"time_ns": oom_t, "device": 0, "requested_bytes": 40 * GiB,
                  "diagnosis": "1. live tensors fill the card: 26.00 GiB allocated of the device's 139.80 GiB; the "
                               "call sites holding the most are listed under \"live at the failure\"\n"
                               "2. other processes hold 6.00 GiB of the device"}],
        "leaks": [
            {"label": SITES[5]["label"], "stack": SITES[5]["stack"], "live_bytes": 20 * 64 * MiB, "allocations": 20,
             "growth_per_iteration_bytes": 64 * MiB},
            {"label": SITES[0]["label"], "stack": SITES[0]["stack"], "live_bytes": 4 * GiB, "allocations": 16,
             "growth_per_iteration_bytes": 0},
            {"label": SITES[7]["label"], "stack": SITES[7]["stack"], "live_bytes": 6 * GiB, "allocations": 12,
             "growth_per_iteration_bytes": None}],
        "traps": [{"kind": "kept_graph", "title": "a tensor kept per iteration: the output of train.py:76 "
                   "train_step, 64.00 MiB each, is still referenced after its iteration",
                   "advice": "A list or attribute keeps one per iteration (`losses.append(loss)`): store `.item()` "
                             "or a CPU copy instead, or drop the reference when the iteration ends."}],
    }


def large(bins):
    random.seed(7)
    bin_ns = 1_000_000  # finest level: 1 ms bins
    n_sites = 40
    alloc = []
    v = 8 * GiB
    for k in range(bins):
        v = max(0, v + random.randrange(-64 * MiB, 64 * MiB + 1))
        alloc.append(v)
    alloc[bins * 2 // 3] = 60 * GiB  # one short spike: the peak, which every level must keep

    def level(width):
        n = bins // width
        lvl = {"bin_ns": bin_ns * width, "t_ns": [k * bin_ns * width for k in range(n)]}
        lo = [min(alloc[k * width:(k + 1) * width]) for k in range(n)]
        hi = [max(alloc[k * width:(k + 1) * width]) for k in range(n)]
        lvl["allocated_min"], lvl["allocated_max"] = lo, hi
        lvl["reserved_min"] = [x + 2 * GiB for x in lo]
        lvl["reserved_max"] = [x + 2 * GiB for x in hi]
        lvl["driver_min"] = [x + 3 * GiB for x in lo]
        lvl["driver_max"] = [x + 3 * GiB for x in hi]
        return lvl

    levels = [level(100), level(10), level(1)]
    end_ns = bins * bin_ns
    peak_k = bins * 2 // 3
    peak = {"bytes": 60 * GiB, "time_ns": peak_k * bin_ns, "event": peak_k}
    n0 = len(levels[0]["t_ns"])
    sites = [{"label": "gen.py:%d site_%d" % (10 + s, s),
              "stack": ["gen.py:1 <module>", "gen.py:5 main", "gen.py:%d site_%d" % (10 + s, s),
                        "native: PyTorch allocator"]} for s in range(n_sites)]
    site_bytes = [[levels[0]["allocated_max"][k] // (n_sites + 1) for k in range(n0)] for _ in range(n_sites)]
    step = end_ns // 20_000
    samples = [[k * step, 12 * GiB + (k % 100) * MiB] for k in range(20_000)]
    flame = {"name": "live at peak allocated", "value": 60 * GiB, "children": [
        {"name": s["stack"][0], "value": 60 * GiB // n_sites, "children": [
            {"name": s["label"], "value": 60 * GiB // n_sites, "children": []}]} for s in sites]}
    it_ns = end_ns // 2000
    spans = [{"index": i + 1, "begin_ns": i * it_ns, "end_ns": (i + 1) * it_ns, "phases": [
        {"phase": "forward", "begin_ns": i * it_ns, "end_ns": i * it_ns + it_ns // 2},
        {"phase": "backward", "begin_ns": i * it_ns + it_ns // 2, "end_ns": (i + 1) * it_ns}]} for i in range(2000)]
    return {
        "format": 1,
        "trace": {"path": "large.mtrace", "command": "gen_trace --large", "host": "bench", "pid": 1,
                  "duration_ns": end_ns, "events": bins * 10, "truncated": False, "health": []},
        "devices": [{"device": 0, "name": "", "total_bytes": 0,
                     "timeline": {"levels": levels, "device_used": samples, "process_used": samples,
                                  "other_processes": [], "peaks": {"allocated": peak, "reserved": peak, "driver": peak}},
                     "sites": sites, "site_bytes": site_bytes, "other_site_bytes": [0] * n0,
                     "site_bytes_at_peak": [60 * GiB // n_sites] * n_sites,
                     "other_site_bytes_at_peak": 60 * GiB - 60 * GiB // n_sites * n_sites,
                     "flame_at_peak": flame, "breakdown_at_peak": []}],
        "iterations": {"source": "NVTX ranges 'step'", "spans": spans},
        "nvtx": [],
        "ooms": [{"time_ns": end_ns // 2, "device": 0, "requested_bytes": GiB, "diagnosis": "stress"}],
        "leaks": [],
        "traps": [],
    }


def fleet():
    """Two ranks of a torchrun job on one host and a DataLoader worker under rank 0: both ranks on GPU 0 (rank 1
    also allocated there, its own device being GPU 1), an untraced process holding 3 GiB of GPU 0, rank 1 leaking.
    The combined timeline of GPU 0 is simulated step by step; its peak and who held what then follow from it."""
    rng = random.Random(20)
    n = 400
    step_ns = 25_000_000  # 10 s
    r0_alloc, r1_alloc = [], []
    for i in range(n):
        phase = (i % 40) / 40
        r0_alloc.append(int((2 + 6 * phase) * GiB) + rng.randrange(64) * MiB)
        r1_alloc.append(int(256 * MiB + i * MiB // 2))
    r0_res = [max(r0_alloc[: i + 1]) // (2 * GiB) * 2 * GiB + 2 * GiB for i in range(n)]
    r1_res = [(a // (512 * MiB) + 1) * 512 * MiB for a in r1_alloc]
    t = [1_000_000 + i * step_ns for i in range(n)]
    alloc = [a + b for a, b in zip(r0_alloc, r1_alloc)]
    res = [a + b for a, b in zip(r0_res, r1_res)]
    pa = max(range(n), key=lambda i: (alloc[i], -i))
    pr = max(range(n), key=lambda i: (res[i], -i))

    def moment(i):
        return {"time_ns": t[i], "allocated_bytes": alloc[i], "reserved_bytes": res[i],
                "member_allocated_bytes": [r0_alloc[i], r1_alloc[i]], "member_reserved_bytes": [r0_res[i], r1_res[i]]}

    def timed(b, at):
        return {"bytes": b, "time_ns": at}

    r0_peak = max(range(n), key=lambda i: (r0_alloc[i], -i))
    r1_peak = max(range(n), key=lambda i: (r1_alloc[i], -i))
    gpu0, gpu1 = "GPU-0a1b2c3d-0000-1111-2222-333344445555", "GPU-9f8e7d6c-0000-1111-2222-333344445555"
    h200 = "NVIDIA H200"
    total = 150_754_820_096

    def device(ordinal, gpu, gpu_index, pa_b, pa_t, pr_b, pr_t, site, first_ns, ooms=0):
        return {"ordinal": ordinal, "gpu": gpu, "name": h200, "gpu_index": gpu_index, "total_bytes": total,
                "peak_allocated": timed(pa_b, pa_t), "peak_reserved": timed(pr_b, pr_t),
                "final_allocated_bytes": 0, "final_reserved_bytes": 0, "allocations": 1000, "ooms": ooms,
                "first_allocation_ns": first_ns, "first_allocation_site": site}

    r1_gpu1 = 12 * GiB
    processes = [
        {"trace": "job-1000.mtrace", "pid": 1000, "ppid": 999, "parent": None, "host": "h200-node", "rank": 0,
         "local_rank": 0, "world_size": 2, "job_id": "torchrun-7", "command": "python train.py --epochs 1",
         "start_ns": 0, "end_ns": 10_500_000_000, "truncated": False,
         "devices": [device(0, gpu0, 0, r0_alloc[r0_peak], t[r0_peak], max(r0_res), t[r0_res.index(max(r0_res))],
                            "train.py:31 main", 1_000_000)],
         "leaked_bytes": 0, "leaked_allocations": 0, "ooms": 0},
        {"trace": "job-1001.mtrace", "pid": 1001, "ppid": 999, "parent": None, "host": "h200-node", "rank": 1,
         "local_rank": 1, "world_size": 2, "job_id": "torchrun-7",
         "command": "python train.py --epochs 1 <img src=x onerror=alert(1)>", "start_ns": 2_000_000,
         "end_ns": 10_400_000_000, "truncated": False,
         "devices": [device(0, gpu0, 0, r1_alloc[r1_peak], t[r1_peak], max(r1_res), t[r1_res.index(max(r1_res))],
                            "train.py:12 setup </script><b>bold</b>", 1_000_000),
                     device(1, gpu1, 1, r1_gpu1, 6_000_000_000, 14 * GiB, 6_000_000_000, "train.py:31 main",
                            3_000_000, ooms=1)],
         "leaked_bytes": 200 * MiB, "leaked_allocations": 200, "ooms": 1},
        {"trace": "job-1002.mtrace", "pid": 1002, "ppid": 1000, "parent": 0, "host": "h200-node", "rank": None,
         "local_rank": None, "world_size": None, "job_id": "torchrun-7",
         "command": "python train.py --epochs 1", "start_ns": 500_000_000, "end_ns": 10_000_000_000,
         "truncated": False, "devices": [], "leaked_bytes": 0, "leaked_allocations": 0, "ooms": 0},
    ]
    r0 = processes[0]["devices"][0]
    r1a, r1b = processes[1]["devices"]
    users0 = [{"process": 0, "ordinal": 0, "peak_allocated": r0["peak_allocated"], "peak_reserved": r0["peak_reserved"]},
              {"process": 1, "ordinal": 0, "peak_allocated": r1a["peak_allocated"], "peak_reserved": r1a["peak_reserved"]}]
    gpus = [
        {"gpu": gpu0, "host": "h200-node", "ordinal": 0, "name": h200, "total_bytes": total, "users": users0,
         "sum_of_peak_allocated_bytes": r0["peak_allocated"]["bytes"] + r1a["peak_allocated"]["bytes"],
         "sum_of_peak_reserved_bytes": r0["peak_reserved"]["bytes"] + r1a["peak_reserved"]["bytes"],
         "untraced": {"bytes": 3 * GiB, "time_ns": 4_000_000_000, "seen_by": 0, "pids": [4242]},
         "combined": {"members": [0, 1], "changes": n, "peak_allocated": moment(pa), "peak_reserved": moment(pr),
                      "points": {"t_ns": t, "allocated_bytes": alloc, "reserved_bytes": res,
                                 "member_allocated_bytes": [r0_alloc, r1_alloc],
                                 "member_reserved_bytes": [r0_res, r1_res]}}},
        {"gpu": gpu1, "host": "h200-node", "ordinal": 1, "name": h200, "total_bytes": total,
         "users": [{"process": 1, "ordinal": 1, "peak_allocated": r1b["peak_allocated"],
                    "peak_reserved": r1b["peak_reserved"]}],
         "sum_of_peak_allocated_bytes": r1_gpu1, "sum_of_peak_reserved_bytes": 14 * GiB,
         "untraced": None, "combined": None},
    ]
    rows = [{"rank": 0, "process": 0, "gpu": gpu0, "ordinal": 0, "peak_allocated": r0["peak_allocated"],
             "peak_reserved": r0["peak_reserved"], "leaked_bytes": 0, "ooms": 0},
            {"rank": 1, "process": 1, "gpu": gpu1, "ordinal": 1, "peak_allocated": r1b["peak_allocated"],
             "peak_reserved": r1b["peak_reserved"], "leaked_bytes": 200 * MiB, "ooms": 1}]
    a0, a1 = r0["peak_allocated"]["bytes"], r1_gpu1
    worst = 0 if a0 >= a1 else 1
    return {
        "format": 1, "kind": "fleet", "origin_unix_ns": "1764676800000000000",
        "summary": {"processes": 3, "hosts": 1, "gpus": 2, "ranks": 2,
                    "worst_rank": {"rank": worst, "process": worst, "peak_allocated": rows[worst]["peak_allocated"]},
                    "largest_combined_peak": {"gpu": 0, "allocated_bytes": alloc[pa], "time_ns": t[pa]},
                    "wrong_devices": 1, "leak_sites": 1},
        "processes": processes,
        "tree": [{"process": 0, "depth": 0}, {"process": 2, "depth": 1}, {"process": 1, "depth": 0}],
        "gpus": gpus,
        "ranks": {"rows": rows, "worst": worst,
                  "peak_allocated_spread_bytes": abs(a0 - a1),
                  "peak_reserved_spread_bytes": abs(r0["peak_reserved"]["bytes"] - 14 * GiB),
                  "median_peak_allocated_bytes": min(a0, a1)},
        "wrong_devices": [{"process": 1, "ordinal": 0, "gpu": gpu0, "local_ordinal": 1,
                           "peak_allocated_bytes": r1a["peak_allocated"]["bytes"], "first_allocation_ns": 1_000_000,
                           "first_allocation_site": "train.py:12 setup </script><b>bold</b>"}],
        "leaks": [{"site_key": "py:train.py:40 step", "site": "train.py:40 step <img src=y>", "bytes": 200 * MiB,
                   "count": 200, "processes": [1]}],
    }


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "sample":
        out = sample()
    elif len(sys.argv) == 3 and sys.argv[1] == "fleet":
        out = fleet()
    elif len(sys.argv) == 4 and sys.argv[1] == "large":
        out = large(int(sys.argv[3]))
    else:
        sys.exit(__doc__)
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
