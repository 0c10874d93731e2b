"""PyTorch jobs whose iterations, peak breakdown and backward allocations memtrace must report exactly.

    python3 iteration_jobs.py JOB TRUTH_JSON        JOB: one of JOBS below

Each job runs a loop of ITERATIONS passes on cuda:0 and writes what PyTorch itself measured to TRUTH_JSON:
  iterations                        passes of the loop
  allocated_after_iteration_bytes   torch.cuda.memory_allocated() after each pass (after a synchronize)
  growth_per_iteration_bytes        median of the deltas from pass 3 on (pass 1 allocates optimizer state)
  max_memory_allocated_bytes        torch.cuda.max_memory_allocated() at the end
  parameter_bytes, gradient_bytes, optimizer_state_bytes
                                    sums of the parameters', their .grad's and the optimizer's state tensors' sizes
                                    (train and nvtx jobs), each rounded up to PyTorch's 512-byte block as allocated
  loop_file, loop_line              the line of the `for` loop; backward_line: the `loss.backward()` line;
                                    body_line: the first line of the loop's body that allocates
  leak_line                         train: the line that keeps a tensor per pass; eval_graph: the line that keeps
                                    the outputs with their autograd graph

train:      an MLP trained with AdamW that keeps one detached activation per pass (a known leak).
eval_graph: the same MLP evaluated WITHOUT torch.no_grad(), keeping each pass's output: every pass keeps its graph.
hf_eval:    a Hugging Face GPT-2 (random weights, 4 layers) evaluated without torch.no_grad(), keeping each
            pass's loss: every pass keeps its graph (the trap as users meet it).
generate:   greedy decoding, one token per pass, with a growing key/value cache (torch.no_grad()).
nvtx:       the train job inside torch.cuda.nvtx ranges "step", "forward", "backward", "optimizer".
train_prewarmed: the train job after a backward on the CPU, before any CUDA call: PyTorch starts its autograd
            device threads at the first backward, so they were running before the tracer started.
"""
import inspect
import json
import os
import statistics
import sys

import torch
import torch.nn as nn

ITERATIONS = int(os.environ.get("ITERATION_JOBS_PASSES", "12"))
WIDTH = 1024
DEPTH = 4
BATCH = 512
BLOCK = 512  # PyTorch's caching allocator rounds every block up to a multiple of 512 bytes


def rounded(nbytes):
    return (nbytes + BLOCK - 1) // BLOCK * BLOCK


def tensor_bytes(tensors):
    return sum(rounded(t.numel() * t.element_size()) for t in tensors)


def mlp():
    layers = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.GELU()]
    return nn.Sequential(*layers).cuda()


def line_of(function, needle):
    source, first = inspect.getsourcelines(function)
    for offset, text in enumerate(source):
        if needle in text:
            return first + offset
    raise RuntimeError(f"iteration_jobs.py: no {needle!r} in {function.__name__}")


def train(nvtx=False):
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kept = []
    after = []
    for step in range(ITERATIONS):  # the loop
        if nvtx:
            torch.cuda.nvtx.range_push("step")
            torch.cuda.nvtx.range_push("forward")
        x = torch.randn(BATCH, WIDTH, device="cuda")
        out = model(x)
        loss = out.square().mean()
        kept.append(out.detach())  # the leak
        if nvtx:
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_push("backward")
        loss.backward()  # backward
        if nvtx:
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_push("optimizer")
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        if nvtx:
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    state = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t) and t.is_cuda]
    params = list(model.parameters())
    return after, {
        "parameter_bytes": tensor_bytes(params),
        "gradient_bytes": tensor_bytes([p.grad for p in params]),
        "optimizer_state_bytes": tensor_bytes(state),
        "leak_bytes_per_iteration": rounded(BATCH * WIDTH * 4),
        "loop_line": line_of(train, "# the loop"),
        "backward_line": line_of(train, "# backward"),
        "leak_line": line_of(train, "# the leak"),
        "body_line": line_of(train, "x = torch.randn"),
    }


def eval_graph():
    model = mlp()
    outputs = []
    after = []
    for step in range(ITERATIONS):  # the loop
        x = torch.randn(BATCH, WIDTH, device="cuda")
        outputs.append(model(x))  # keeps the graph
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    return after, {"parameter_bytes": tensor_bytes(model.parameters()),
                   "loop_line": line_of(eval_graph, "# the loop"),
                   "body_line": line_of(eval_graph, "x = torch.randn"),
                   "leak_line": line_of(eval_graph, "# keeps the graph")}


def generate():
    vocab, heads, head_dim, layers = 4096, 8, 64, 4
    width = heads * head_dim
    embed = nn.Embedding(vocab, width).cuda()
    qkv = nn.ModuleList(nn.Linear(width, 3 * width) for _ in range(layers)).cuda()
    head = nn.Linear(width, vocab).cuda()
    batch = 64
    cache = [None] * layers
    token = torch.zeros(batch, 1, dtype=torch.long, device="cuda")
    after = []
    with torch.no_grad():
        for step in range(ITERATIONS):  # the loop
            h = embed(token)
            for i in range(layers):
                q, k, v = qkv[i](h).split(width, dim=-1)
                cache[i] = (k, v) if cache[i] is None else (torch.cat([cache[i][0], k], 1), torch.cat([cache[i][1], v], 1))
                att = torch.softmax(q @ cache[i][0].transpose(1, 2) / head_dim**0.5, -1)
                h = h + att @ cache[i][1]
            token = head(h).argmax(-1)
            torch.cuda.synchronize()
            after.append(torch.cuda.memory_allocated())
    return after, {"loop_line": line_of(generate, "# the loop"), "body_line": line_of(generate, "h = embed(token)")}


def hf_eval():
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192)).cuda().eval()
    losses = []
    after = []
    for step in range(ITERATIONS):  # the loop
        ids = torch.randint(0, 8192, (8, 256), device="cuda")
        losses.append(model(ids, labels=ids).loss)  # keeps the graph
        torch.cuda.synchronize()
        after.append(torch.cuda.memory_allocated())
    return after, {"parameter_bytes": tensor_bytes(model.parameters()),
                   "loop_line": line_of(hf_eval, "# the loop"),
                   "body_line": line_of(hf_eval, "ids = torch.randint"),
                   "leak_line": line_of(hf_eval, "# keeps the graph")}


def train_prewarmed():
    leaf = torch.ones(4, requires_grad=True)
    (leaf * 2).sum().backward()  # on the CPU: starts the autograd engine's device threads before CUDA is touched
    return train()


JOBS = {"train": train, "train_prewarmed": train_prewarmed, "nvtx": lambda: train(nvtx=True), "eval_graph": eval_graph, "hf_eval": hf_eval,
        "generate": generate}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in JOBS:
        sys.exit("usage: iteration_jobs.py " + "|".join(JOBS) + " TRUTH_JSON")
    job = sys.argv[1]
    torch.manual_seed(0)
    after, truth = JOBS[job]()
    deltas = [b - a for a, b in zip(after[1:], after[2:])]
    loop_function = "train" if job in ("train", "train_prewarmed", "nvtx") else job
    truth.update({"job": job, "loop_function": loop_function, "iterations": ITERATIONS,
                  "allocated_after_iteration_bytes": after,
                  "growth_per_iteration_bytes": int(statistics.median(deltas)) if deltas else 0,
                  "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
                  "loop_file": os.path.abspath(__file__)})
    with open(sys.argv[2], "w") as f:
        json.dump(truth, f, indent=1)
    print(f"iteration_jobs {job}: {json.dumps({k: v for k, v in truth.items() if k != 'allocated_after_iteration_bytes'})}")


if __name__ == "__main__":
    main()
