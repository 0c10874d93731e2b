"""A small real training run (three Linear layers, Adam, a few iterations on CUDA) that PyTorch records itself with
torch.cuda.memory._record_memory_history while memtrace records it too (scripts/gpu-check's `exports` group runs it
under `memtrace run`). At its end it writes PyTorch's own snapshot, torch.cuda.memory._snapshot(), as a pickle, for
tests/gpu/memory_viz_checks.py to compare with `memtrace export --format memory-viz`.

    memory_viz_job.py SNAPSHOT.pickle

The two records must cover the same PyTorch allocator events:
- history is turned on before the first CUDA allocation, so PyTorch's trace starts where memtrace's block events do;
  max_entries is far above what the job makes, so its ring buffer never drops an entry;
- the snapshot is taken once every tensor the job no longer needs is gone (the loop's locals deleted, a garbage
  collection, a synchronize), and what it keeps (model, optimizer) is held by module globals until the interpreter
  finalizes, where memtrace's export ends (docs/commands/export.md): no PyTorch allocator event happens between
  the two;
- stacks="python": C++ frames would cost a symbolization of every stack at _snapshot() and are not compared.
"""
import gc
import pickle
import sys

import torch

ITERATIONS = 6
WIDTH = 1024
BATCH = 256
MAX_ENTRIES = 1_000_000


def train():
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, 10),
    ).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(ITERATIONS):
        x = torch.randn(BATCH, WIDTH, device="cuda")
        y = torch.randint(0, 10, (BATCH,), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        del x, y, loss
    return model, optimizer


def main(snapshot_path):
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=MAX_ENTRIES)
    kept = train()
    gc.collect()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    with open(snapshot_path, "wb") as f:
        pickle.dump(snapshot, f)
    entries = sum(len(t) for t in snapshot["device_traces"])
    print(f"memory_viz_job: {entries} trace entries, {len(snapshot['segments'])} segments,"
          f" {torch.cuda.memory_allocated()} bytes allocated")
    return kept


if __name__ == "__main__":
    KEPT = main(sys.argv[1])  # held until the interpreter finalizes (see above)
