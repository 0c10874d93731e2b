"""A torchrun job of 2 ranks sharing the one GPU, beside an untraced process, for scripts/gpu-check's `fleet` group.

    python3 fleet_job.py launch --dir DIR --memtrace MEMTRACE     the whole job (what gpu-check runs)
    python3 fleet_job.py rank --dir DIR                           one rank (torchrun starts it)
    python3 fleet_job.py holder READY_JSON                        the untraced neighbour

`launch` empties DIR, starts the holder WITHOUT memtrace (a second python process that holds one cudaMalloc of
HOLD_BYTES, torch.empty of 1 GiB, from before the job starts until after it ends), then runs

    memtrace run -o DIR/traces/fleet-%p.mtrace -- python -m torch.distributed.run --standalone --nproc-per-node 2
        fleet_job.py rank --dir DIR

and writes DIR/launch.json: {"agent_pid" (torchrun's process: memtrace run replaces itself with it), "returncode",
"holder": the holder's READY_JSON {"pid", "held_bytes"}, "seconds"}.

Each rank (gloo backend: the ranks share one GPU, which NCCL refuses) works on cuda:0: on one GPU both ranks are on
device 0, whatever their LOCAL_RANK (torchrun's convention would put rank 1 on cuda:1, which this machine lacks).
  - rank 1 first allocates STRAY_BYTES on "cuda:0" from a line of its own (stray_line): the classic "every rank also
    touches cuda:0" line. Here device 0 IS rank 1's device, so memtrace's wrong-device rule (the local device is the
    ordinal equal to LOCAL_RANK where the process used it, else the device where it peaked) must not fire: this job
    can only check that it does not misfire; a real wrong device needs two GPUs (tests/analyzer's fleet tests).
  - both train a small MLP for STEPS steps on batches from a DataLoader with 2 worker processes (forked, never
    calling CUDA: they must leave no trace file), all-reducing the loss over gloo;
  - rank 1 leaks LEAK_BYTES per step (leak_line: a module-level list keeps them past main(), so they are live when
    the interpreter finalizes); rank 0 leaks nothing;
  - rank 0 also starts one child with multiprocessing's spawn (a new interpreter, child of rank 0) that allocates
    CHILD_BYTES on cuda:0 and exits: a traced child under its traced parent;
  - each writes DIR/rank-RANK.json (the child DIR/child.json) at its end: its own torch.cuda figures
    (max_memory_allocated, memory_allocated, max_memory_reserved, memory_reserved), pid, ppid, rank, local_rank,
    world_size, the lines and sizes above, and the pids of the DataLoader workers that made its samples.
"""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time

MiB = 1024 * 1024
HOLD_BYTES = 1024 * MiB
STRAY_BYTES = 8 * MiB
LEAK_BYTES = 4 * MiB
CHILD_BYTES = 32 * MiB
STEPS = 8
BATCH = 64
FEATURES = 256
CLASSES = 10
WORKERS = 2
WORLD_SIZE = 2

leaked = []  # rank 1's leak: module-level, so that it is still held when the interpreter finalizes


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.rename(tmp, path)  # readers poll for the file: it appears complete


def torch_figures(torch):
    return {"max_memory_allocated_bytes": torch.cuda.max_memory_allocated(0),
            "memory_allocated_bytes": torch.cuda.memory_allocated(0),
            "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(0),
            "memory_reserved_bytes": torch.cuda.memory_reserved(0)}


def this_line():
    return sys._getframe(1).f_lineno


# ---- the spawned child of rank 0 ---------------------------------------------------------------------------------

def child_main(out_dir):
    import torch
    block = torch.empty(CHILD_BYTES, dtype=torch.uint8, device="cuda:0")
    block.fill_(1)
    torch.cuda.synchronize(0)
    figures = torch_figures(torch)
    del block
    write_json(os.path.join(out_dir, "child.json"),
               dict(figures, pid=os.getpid(), ppid=os.getppid(), child_bytes=CHILD_BYTES))


# ---- one rank ------------------------------------------------------------------------------------------------------

def rank_main(out_dir):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

    class RandomSamples(Dataset):
        """Sample i: FEATURES floats from a CPU generator seeded with i, label i % CLASSES, the maker's pid."""

        def __len__(self):
            return STEPS * BATCH * WORLD_SIZE

        def __getitem__(self, index):
            generator = torch.Generator().manual_seed(index)
            return torch.randn(FEATURES, generator=generator), index % CLASSES, os.getpid()

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    device = torch.device("cuda", 0)  # one GPU: both ranks on device 0 (see the docstring)
    torch.cuda.set_device(device)
    truth = {"pid": os.getpid(), "ppid": os.getppid(), "rank": rank, "local_rank": local_rank,
             "world_size": world_size, "steps": STEPS, "leak_bytes": LEAK_BYTES, "leak_line": None,
             "stray_bytes": 0, "stray_line": None, "child_pid": None}
    stray = None
    if rank == 1:
        # The first allocation of rank 1, on "cuda:0" from a line of its own.
        stray = torch.empty(STRAY_BYTES, dtype=torch.uint8, device="cuda:0"); truth["stray_line"] = this_line()  # noqa: E702
        truth["stray_bytes"] = STRAY_BYTES

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 512), nn.ReLU(), nn.Linear(512, CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    sampler = DistributedSampler(RandomSamples(), num_replicas=world_size, rank=rank, shuffle=False)
    loader = DataLoader(RandomSamples(), batch_size=BATCH, sampler=sampler, num_workers=WORKERS,
                        persistent_workers=False)
    worker_pids = set()
    steps = 0
    for features, labels, makers in loader:
        worker_pids.update(int(p) for p in makers)
        features, labels = features.to(device), labels.to(device)
        loss = F.cross_entropy(model(features), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if rank == 1:
            leaked.append(torch.empty(LEAK_BYTES, dtype=torch.uint8, device=device)); truth["leak_line"] = this_line()  # noqa: E702
        total = loss.detach().cpu()
        dist.all_reduce(total)
        steps += 1
    torch.cuda.synchronize(device)
    truth["steps"] = steps
    truth["worker_pids"] = sorted(worker_pids)

    if rank == 0:
        child = multiprocessing.get_context("spawn").Process(target=child_main, args=(out_dir,))
        child.start()
        child.join()
        truth["child_pid"] = child.pid
        truth["child_exitcode"] = child.exitcode

    del stray, model, optimizer, loader, features, labels, loss
    truth.update(torch_figures(torch))  # what is left: rank 1's leak, held by `leaked`
    dist.barrier()
    dist.destroy_process_group()
    write_json(os.path.join(out_dir, f"rank-{rank}.json"), truth)


# ---- the untraced neighbour --------------------------------------------------------------------------------------

def holder_main(ready_path):
    import torch
    held = torch.empty(HOLD_BYTES, dtype=torch.uint8, device="cuda:0")  # one cudaMalloc of exactly HOLD_BYTES
    torch.cuda.synchronize(0)
    write_json(ready_path, {"pid": os.getpid(), "held_bytes": HOLD_BYTES})
    print(f"holder: pid {os.getpid()} holding {HOLD_BYTES} B on cuda:0", flush=True)
    sys.stdin.read()  # until the launcher closes the pipe (or dies)
    del held


# ---- the launcher ----------------------------------------------------------------------------------------------

def untraced_env():
    """This environment without memtrace's variables: the holder must not be traced."""
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("MEMTRACE_"):
            del env[key]
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p and "libmemtrace" not in p]
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    else:
        env.pop("LD_PRELOAD", None)
    return env


def wait_for(path, process, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if os.path.exists(path):
            return True
        time.sleep(0.1)
    return os.path.exists(path)


def launch(out_dir, memtrace, timeout_s):
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.endswith(".json") or name.endswith(".tmp"):
            os.remove(os.path.join(out_dir, name))
    traces = os.path.join(out_dir, "traces")
    if os.path.isdir(traces):
        for name in os.listdir(traces):
            os.remove(os.path.join(traces, name))
    os.makedirs(traces, exist_ok=True)
    ready = os.path.join(out_dir, "holder.json")
    holder = subprocess.Popen([sys.executable, os.path.abspath(__file__), "holder", ready], stdin=subprocess.PIPE,
                              env=untraced_env())
    try:
        if not wait_for(ready, holder, 60):
            sys.exit(f"fleet_job.py: the holder wrote no {ready} within 60 s")
        command = [memtrace, "run", "-o", os.path.join(traces, "fleet-%p.mtrace"), "--",
                   sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORLD_SIZE}",
                   os.path.abspath(__file__), "rank", "--dir", out_dir]
        print("fleet_job.py:", " ".join(command), flush=True)
        started = time.monotonic()
        job = subprocess.Popen(command)
        try:
            returncode = job.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            job.kill()
            returncode = job.wait()
        seconds = time.monotonic() - started
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    with open(ready) as f:
        held = json.load(f)
    write_json(os.path.join(out_dir, "launch.json"),
               {"agent_pid": job.pid, "returncode": returncode, "holder": held, "seconds": seconds})
    print(f"fleet_job.py: torchrun exited {returncode} after {seconds:.1f} s", flush=True)
    return returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("launch")
    p.add_argument("--dir", required=True)
    p.add_argument("--memtrace", required=True)
    p.add_argument("--timeout", type=float, default=150)
    p = sub.add_parser("rank")
    p.add_argument("--dir", required=True)
    p = sub.add_parser("holder")
    p.add_argument("ready")
    args = parser.parse_args()
    if args.what == "launch":
        sys.exit(launch(os.path.abspath(args.dir), args.memtrace, args.timeout))
    if args.what == "rank":
        rank_main(os.path.abspath(args.dir))
    else:
        holder_main(args.ready)


if __name__ == "__main__":
    main()
