"""Jobs on several GPUs of one host, for `scripts/gpu-check --multi-gpu` (the `multi_gpu` group).

    python3 multi_gpu_job.py launch VARIANT --dir DIR --memtrace MEMTRACE --nproc N   a torchrun job under memtrace
    python3 multi_gpu_job.py rank VARIANT --dir DIR                                   one rank (torchrun starts it)
    python3 multi_gpu_job.py peer --dir DIR                                           one process on two GPUs

`launch` empties DIR, runs

    memtrace run -o DIR/traces/multi-%p.mtrace -- python -m torch.distributed.run --standalone --nproc-per-node N
        multi_gpu_job.py rank VARIANT --dir DIR

and writes DIR/launch.json {"variant", "nproc", "agent_pid", "returncode", "seconds"}. Each rank writes
DIR/rank-RANK.json at its end with its own figures (below). The variants, each on NCCL (NVLink multicast off, as the
machine sets it: NCCL_NVLS_ENABLE=0):
  - ddp: rank r on cuda:LOCAL_RANK (torch.cuda.set_device), a small MLP wrapped in DistributedDataParallel, STEPS
    steps of SGD. Figures: torch.cuda.max_memory_allocated/max_memory_reserved of its device, its GPU's UUID.
  - no_set_device: the same job with torch.cuda.set_device forgotten. Every rank first makes a small tensor on
    "cuda" (device 0 for every rank: the classic "every rank also touches cuda:0"), from its own line (stray_line),
    then trains on cuda:LOCAL_RANK given explicitly (and NCCL is bound to it through init_process_group's
    device_id). Figures as ddp, plus the stray line and bytes and torch's peaks on device 0.
  - fsdp: a small MLP under FSDP2 (torch.distributed.fsdp.fully_shard) with Adam, STEPS steps. Figures as ddp, plus
    the bytes of the rank's parameter shards and optimizer state as PyTorch's allocator holds them: each distinct
    storage's size rounded up to the caching allocator's 512-byte blocks (its round_size).
`peer` (no torchrun, needs two GPUs) runs with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: tensors on cuda:0
and cuda:1, copies both ways (PyTorch enables peer access, and its expandable segments then call cuMemSetAccess for
the peer), and writes DIR/peer.json with torch's peaks and final figures of both devices.
"""
import argparse
import json
import os
import subprocess
import sys
import time

MiB = 1024 * 1024
STEPS = 20
BATCH = 64
FEATURES = 1024
HIDDEN = 4096
CLASSES = 16
STRAY_BYTES = 2 * MiB
BLOCK_ROUND_BYTES = 512  # PyTorch's CUDACachingAllocator rounds every block up to a multiple of 512 bytes


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.rename(tmp, path)


def this_line():
    return sys._getframe(1).f_lineno


def device_figures(torch, device):
    return {"max_memory_allocated_bytes": torch.cuda.max_memory_allocated(device),
            "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(device),
            "memory_allocated_bytes": torch.cuda.memory_allocated(device),
            "memory_reserved_bytes": torch.cuda.memory_reserved(device),
            "uuid": "GPU-" + str(torch.cuda.get_device_properties(device).uuid)}


def block_bytes(tensors):
    """What PyTorch's allocator holds for these tensors: each distinct storage's size, rounded to 512 bytes."""
    seen = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(-(-n // BLOCK_ROUND_BYTES) * BLOCK_ROUND_BYTES for n in seen.values())


def local(t):
    """A DTensor's local shard (FSDP2's parameters and their optimizer state), or the tensor itself."""
    return t.to_local() if hasattr(t, "to_local") else t


# ---- one rank ------------------------------------------------------------------------------------------------------

def rank_main(variant, out_dir):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", local_rank)
    truth = {"variant": variant, "pid": os.getpid(), "ppid": os.getppid(), "rank": rank, "local_rank": local_rank,
             "world_size": world_size, "steps": STEPS}
    stray = None
    if variant == "no_set_device":
        # torch.cuda.set_device(local_rank) forgotten: "cuda" is device 0 for every rank.
        stray = torch.empty(STRAY_BYTES, dtype=torch.uint8, device="cuda"); truth["stray_line"] = this_line()  # noqa: E702
        truth["stray_bytes"] = STRAY_BYTES
        dist.init_process_group("nccl", device_id=device)
    else:
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES)).to(device)
    if variant == "fsdp":
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator(device=device).manual_seed(rank)
    for _ in range(STEPS):
        features = torch.randn(BATCH, FEATURES, device=device, generator=generator)
        labels = torch.randint(0, CLASSES, (BATCH,), device=device, generator=generator)
        loss = F.cross_entropy(model(features), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    truth["loss"] = float(loss.detach().cpu())
    if variant == "fsdp":
        params = [local(p) for p in model.parameters()]
        truth["parameter_shard_bytes"] = block_bytes(params)
        state = [local(v) for s in optimizer.state.values() for v in s.values()
                 if torch.is_tensor(v) and local(v).is_cuda]
        truth["optimizer_state_bytes"] = block_bytes(state)
        truth["parameter_full_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
    truth.update(device_figures(torch, device))
    if variant == "no_set_device":
        truth["device0"] = device_figures(torch, 0)
    dist.barrier()
    dist.destroy_process_group()
    del stray
    write_json(os.path.join(out_dir, f"rank-{rank}.json"), truth)


# ---- one process on two GPUs, peer access and expandable segments --------------------------------------------------

def peer_main(out_dir):
    import torch
    truth = {"pid": os.getpid(), "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    truth["can_access_peer"] = torch.cuda.can_device_access_peer(0, 1)
    a = torch.ones(64 * MiB // 4, device="cuda:0")
    b = torch.ones(96 * MiB // 4, device="cuda:1")
    for _ in range(4):
        on1 = a.to("cuda:1")  # device-to-device copies: PyTorch enables peer access between the two
        on0 = b.to("cuda:0")
        a.add_(on0[: a.numel()])
        b[: a.numel()].add_(on1)
        del on0, on1
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    truth["devices"] = {str(d): device_figures(torch, d) for d in (0, 1)}
    truth["sum"] = float(a.sum().item() + b.sum().item())
    write_json(os.path.join(out_dir, "peer.json"), truth)


# ---- the launcher ----------------------------------------------------------------------------------------------

def launch(variant, out_dir, memtrace, nproc, timeout_s):
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.endswith(".json") or name.endswith(".tmp"):
            os.remove(os.path.join(out_dir, name))
    traces = os.path.join(out_dir, "traces")
    os.makedirs(traces, exist_ok=True)
    for name in os.listdir(traces):
        os.remove(os.path.join(traces, name))
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    argv = [memtrace, "run", "-o", os.path.join(traces, "multi-%p.mtrace"), "--",
            sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            os.path.abspath(__file__), "rank", variant, "--dir", out_dir]
    started = time.monotonic()
    agent = subprocess.Popen(argv, env=env)
    try:
        returncode = agent.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        agent.kill()
        returncode = agent.wait()
    write_json(os.path.join(out_dir, "launch.json"),
               {"variant": variant, "nproc": nproc, "agent_pid": agent.pid, "returncode": returncode,
                "seconds": time.monotonic() - started})
    return returncode


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["launch", "rank", "peer"])
    parser.add_argument("variant", nargs="?", choices=["ddp", "no_set_device", "fsdp"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--memtrace")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=150)
    args = parser.parse_args()
    if args.mode == "peer":
        peer_main(args.dir)
    elif args.mode == "rank":
        rank_main(args.variant, args.dir)
    else:
        sys.exit(0 if launch(args.variant, args.dir, args.memtrace, args.nproc, args.timeout) == 0 else 1)


if __name__ == "__main__":
    main()
