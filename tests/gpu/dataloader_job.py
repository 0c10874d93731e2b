"""A small training loop fed by a PyTorch DataLoader with 4 worker processes, for scripts/gpu-check.

    python3 dataloader_job.py --start-method fork|spawn --truth TRUTH_JSON

The workers only make CPU tensors (a sample is FEATURES floats from a generator seeded with its index); the main
process moves each batch to cuda:0 and trains a 2-layer MLP on it for EPOCHS epochs. Workers are not persistent,
so every epoch starts 4 new ones: 8 worker processes per run. Under "fork" they are forked from a process whose
CUDA context and tracer are running; under "spawn" they are new Python interpreters (started with fork + exec, or
vfork + exec) that inherit LD_PRELOAD and MEMTRACE_OUTPUT. None of them calls CUDA, so none may leave a trace file.

The truth file holds what gpu-check compares between the runs without and with memtrace, and with memtrace's trace:
  pid                                  the main process (its trace file is named after it)
  batches, samples, samples_sum        what the workers delivered (the sum of every float, in batch order)
  final_loss                           the last batch's loss
  samples_from_main_process            samples whose __getitem__ ran in the main process (0: workers made them all)
  worker_pids                          the distinct processes that made samples
  max_memory_allocated_bytes           torch.cuda.max_memory_allocated() at the end
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

FEATURES = 512
CLASSES = 10
SAMPLES = 4096
BATCH = 128
EPOCHS = 2
WORKERS = 4


class RandomSamples(Dataset):
    """Sample i: (FEATURES floats from a CPU generator seeded with i, label i % CLASSES, pid of the maker)."""

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        return torch.randn(FEATURES, generator=generator), index % CLASSES, os.getpid()


def train(start_method):
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 1024), nn.ReLU(), nn.Linear(1024, CLASSES)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # CUDA is initialized (model on the GPU) before the first worker starts, as in a real job.
    loader = DataLoader(RandomSamples(), batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                        multiprocessing_context=start_method, persistent_workers=False,
                        generator=torch.Generator().manual_seed(0))
    batches = samples = 0
    samples_sum = 0.0
    maker_pids = set()
    samples_from_main = 0
    loss = None
    for _ in range(EPOCHS):
        for x, y, pids in loader:
            batches += 1
            samples += len(y)
            samples_sum += float(x.double().sum())
            maker_pids.update(pids.tolist())
            samples_from_main += int((pids == os.getpid()).sum())
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    return {
        "pid": os.getpid(),
        "start_method": start_method,
        "epochs": EPOCHS,
        "num_workers": WORKERS,
        "batches": batches,
        "samples": samples,
        "samples_sum": samples_sum,
        "final_loss": loss.item(),
        "samples_from_main_process": samples_from_main,
        "worker_pids": sorted(maker_pids),
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "torch_version": torch.__version__,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-method", choices=["fork", "spawn"], required=True)
    parser.add_argument("--truth", required=True, help="where to write the JSON side file")
    args = parser.parse_args()
    t_start = time.monotonic()
    truth = train(args.start_method)
    truth["seconds"] = time.monotonic() - t_start
    with open(args.truth, "w") as f:
        json.dump(truth, f, indent=1)
    print(f"dataloader_job: {args.start_method}, {truth['batches']} batches from {len(truth['worker_pids'])} "
          f"worker processes, final loss {truth['final_loss']:.6f}, "
          f"max allocated {truth['max_memory_allocated_bytes']} B, {truth['seconds']:.1f} s")


# The guard matters: under "spawn" every worker imports this file as __mp_main__ to find RandomSamples.
if __name__ == "__main__":
    main()
