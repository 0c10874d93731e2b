"""A small transformer training loop that keeps every step's loss tensor alive: the leak memtrace must find.

    python3 train_leak.py [TRUTH_JSON]        (or TRAIN_LEAK_TRUTH=path; without one, no side file)

Trains a 2-layer nn.TransformerEncoder language model on random tokens with AdamW, fp32, on cuda:0, for
TRAIN_LEAK_STEPS steps (default 40). The leak: `losses` is a module-level list and each step appends the loss
TENSOR (not .item()), so one small block per step stays allocated until the interpreter finalizes: memtrace
reports it as "live at exit", growing step after step.

The truth file holds PyTorch's own figures for scripts/gpu-check to compare with memtrace's:
  max_memory_allocated_bytes, max_memory_reserved_bytes   torch.cuda.max_memory_*() at the end of training
  leak_file, leak_line                                    the line that appends the loss (found with inspect)
  steps, allocated_after_step_bytes                       torch.cuda.memory_allocated() after each step
  growth_per_step_bytes                                   the steady per-step growth (median of step 2.. deltas)
  allocator_backend, alloc_conf                           torch.cuda.get_allocator_backend(), PYTORCH_CUDA_ALLOC_CONF
  seconds_*                                               wall-clock phases, to judge memtrace's growth heuristic
PyTorch reads PYTORCH_CUDA_ALLOC_CONF itself when CUDA initializes (expandable_segments:True,
backend:cudaMallocAsync); this script only reports what was in effect.
"""
import inspect
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Sized so that the training loop, not CUDA start-up and exit, takes most of the traced run: 32,768 tokens a
# step through ~15M parameters is about 6 * 15e6 * 32768 = 3e12 FLOP, some 2-4 s for 40 steps of fp32 on an
# H200. memtrace calls a leak site growing only when its allocations span at least half of the trace.
VOCAB = 8192
D_MODEL = 512
LAYERS = 2
HEADS = 8
BATCH = 64
SEQ = 512

# Module-level on purpose: still referenced when the interpreter starts finalizing, i.e. "live at exit".
losses = []


class TinyLM(nn.Module):
    """Token embedding -> TransformerEncoder -> vocabulary logits."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=4 * D_MODEL, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def train_step(model, optimizer, device):
    """One step on a random batch; appends the loss tensor to `losses` (the leak)."""
    x = torch.randint(0, VOCAB, (BATCH, SEQ), device=device)
    y = torch.randint(0, VOCAB, (BATCH, SEQ), device=device)
    logits = model(x)
    losses.append(F.cross_entropy(logits.view(-1, VOCAB), y.view(-1)))  # leak
    losses[-1].backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def leak_line():
    """Line number of the statement in train_step that appends the loss (the one marked '# leak')."""
    source, first_line = inspect.getsourcelines(train_step)
    for offset, text in enumerate(source):
        if "losses.append(" in text:
            return first_line + offset
    raise RuntimeError("train_leak.py: no losses.append( line in train_step")


def truth_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("TRAIN_LEAK_TRUTH")


def main():
    steps = int(os.environ.get("TRAIN_LEAK_STEPS", "40"))
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    t_start = time.monotonic()
    model = TinyLM().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    allocated_after_step = []
    t_loop = time.monotonic()
    for _ in range(steps):
        train_step(model, optimizer, device)
        torch.cuda.synchronize(device)
        allocated_after_step.append(torch.cuda.memory_allocated(device))
    t_loop_end = time.monotonic()

    # Step 1 also allocates AdamW's state; from step 2 on the only change is the kept loss.
    deltas = [b - a for a, b in zip(allocated_after_step, allocated_after_step[1:])]
    truth = {
        "steps": steps,
        "device": 0,
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(device),
        "final_memory_allocated_bytes": torch.cuda.memory_allocated(device),
        "allocated_after_step_bytes": allocated_after_step,
        "growth_per_step_bytes": int(statistics.median(deltas)) if deltas else 0,
        "leak_file": os.path.abspath(__file__),
        "leak_line": leak_line(),
        "allocator_backend": torch.cuda.get_allocator_backend(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "torch_version": torch.__version__,
        "seconds_setup": t_loop - t_start,
        "seconds_loop": t_loop_end - t_loop,
        "final_loss": losses[-1].item(),
    }
    if truth_path():
        with open(truth_path(), "w") as f:
            json.dump(truth, f, indent=1)
    print(f"train_leak: {steps} steps, loss {truth['final_loss']:.4f}, backend {truth['allocator_backend']}, "
          f"max allocated {truth['max_memory_allocated_bytes']} B, max reserved {truth['max_memory_reserved_bytes']} B, "
          f"growth {truth['growth_per_step_bytes']} B/step, leak line {truth['leak_line']}")


if __name__ == "__main__":
    main()
