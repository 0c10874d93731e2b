"""One mode of scripts/gpu-bench: a GPT-2-small-sized training loop, timed step by step, in its own process.

    python3 gpt_bench.py --result RESULT.json [--record none|python|all] [--snapshot SNAPSHOT.pickle]
                         [--steps 50] [--warmup 5] [--tiny] [--device cuda|cpu]
                         [--toggle-every N [--toggle-states memtrace,off,recorder,memtrace32]]

The model is the one of PyTorch recorder's baseline run (docs/performance.md, "GPU training loop"), so that the figures compare with it: an
nn.TransformerEncoder of 12 pre-norm layers, d_model 768, 12 heads, FFN 3072, a 50257-token vocabulary, batch
8 x 1024 random tokens, bf16 autocast, AdamW (PyTorch's default foreach implementation). Each step, from drawing
the batch to optimizer.zero_grad(), is bracketed by torch.cuda.synchronize() and timed with perf_counter.

--record python|all turns on PyTorch's own recorder, torch.cuda.memory._record_memory_history(max_entries=10**7,
stacks=...), before the model is built (so it sees the same allocations as memtrace, which is preloaded), and
after the timed steps writes the snapshot with torch.cuda.memory._dump_snapshot(SNAPSHOT), timing that call.
--record none runs without it: memtrace, when wanted, is put around the whole process by scripts/gpu-bench.
PyTorch reads PYTORCH_CUDA_ALLOC_CONF itself (backend:cudaMallocAsync); the result names the backend in effect.

--toggle-every N (under libmemtrace-bench-toggle.so, scripts/gpu-toggle-bench) switches between states every N
timed steps (warm-up steps record, as the tracer's defaults): "off" (the hooks forward, nothing is recorded),
"memtrace" (the tracer recording at its settings), "memtraceK" (recording with K native frames on threads with
Python frames, memtrace_bench_set_max_frames_python) and "recorder" (PyTorch's recorder on, stacks="python", the
tracer not recording: _record_memory_history(stacks="python") before the block, (enabled=None) after it).
--toggle-states lists them (default memtrace,off; "off" is needed). The blocks come in groups holding each state
once, the order within a group running through every permutation in turn (memtrace, off, off, memtrace, ...), so
that a steady drift of the machine falls on every state alike. bench/gpu/toggle_report.py reads it.

--tiny (with --device cpu) is a seconds-long dry run of the same code on a 2-layer d_model 64 model, so that the
script can be tried where there is no GPU; the recorder needs CUDA and is refused there.

RESULT.json holds:
  step_ms                   every timed step's wall time, in milliseconds, in order
  median_step_ms            their median
  issue_ms                  every timed step's wall time until step() returned, before the closing synchronize:
                            the time the CPU took to issue the step's work (the GPU may still be running it)
  issue_cpu_ms              the process's CPU time (every thread: Python's, the autograd engine's, a tracer's)
                            over the same interval. A profiler's cost is CPU time, so this moves with it even
                            when the step time, which the GPU can bound, does not
  step_state                with --toggle-every: each timed step's state (one of toggle_states); else null
  warmup_steps, steps, toggle_every, toggle_states, record, tiny, device, torch_version, gpu, allocator_backend, alloc_conf
  max_memory_allocated_bytes, max_memory_reserved_bytes     torch.cuda.max_memory_*() after the timed steps
  dump_snapshot_s           wall time of _dump_snapshot (null without --record)
  snapshot_bytes            size of the pickle on disk (null without --record)
  snapshot_entries          allocator events kept in the snapshot: the sum over devices of len(device_traces[d])
  wall_s                    the whole script, from its first line to writing RESULT.json
"""
import argparse
import itertools
import json
import os
import pickle
import statistics
import sys
import time

START_S = time.perf_counter()

# GPT-2 small (124M parameters), as in peer-baseline.md.
FULL_SHAPE = {"vocab": 50257, "d_model": 768, "layers": 12, "heads": 12, "ffn": 3072, "batch": 8, "seq": 1024}
# A dry run's shape: small enough for a few CPU seconds a step at most.
TINY_SHAPE = {"vocab": 1000, "d_model": 64, "layers": 2, "heads": 4, "ffn": 256, "batch": 2, "seq": 32}
# The ring PyTorch keeps its events in: large enough that nothing of 55 steps (~3,400 entries a step in
# peer-baseline.md) is dropped, so the snapshot is the whole run, like the trace.
MAX_ENTRIES = 10**7


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--result", required=True, help="where to write the JSON result")
    parser.add_argument("--record", choices=("none", "python", "all"), default="none",
                        help="PyTorch's _record_memory_history stacks= setting; none leaves it off")
    parser.add_argument("--snapshot", help="the _dump_snapshot pickle (needed with --record python|all)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before them (default 5)")
    parser.add_argument("--tiny", action="store_true", help="a small model, for a dry run")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--toggle-every", type=int, default=0, metavar="N",
                        help="switch the tracer's recording off and on every N timed steps (libmemtrace-bench-toggle.so)")
    parser.add_argument("--toggle-states", default="memtrace,off", type=lambda text: text.split(","),
                        help="with --toggle-every: the states, comma-separated: off, memtrace, memtraceK, recorder")
    args = parser.parse_args(argv)
    if args.record != "none" and not args.snapshot:
        parser.error("--record %s needs --snapshot PATH" % args.record)
    if args.record != "none" and args.device != "cuda":
        parser.error("--record %s needs --device cuda: PyTorch records only its CUDA allocator" % args.record)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be at least 1 and --warmup at least 0")
    if args.toggle_every < 0:
        parser.error("--toggle-every must be at least 0")
    problem = toggle_states_problem(args.toggle_states)
    if problem:
        parser.error("--toggle-states: " + problem)
    if "recorder" in args.toggle_states and args.toggle_every and (args.record != "none" or args.device != "cuda"):
        parser.error("--toggle-states with recorder needs --record none and --device cuda")
    return args


def bench_switches():
    """memtrace_bench_set_recording and memtrace_bench_set_max_frames_python of the preloaded
    libmemtrace-bench-toggle.so (preload/measure/bench_toggle.h), or exits with a message."""
    import ctypes
    switches = []
    for name in ("memtrace_bench_set_recording", "memtrace_bench_set_max_frames_python"):
        try:
            switch = getattr(ctypes.CDLL(None), name)
        except AttributeError:
            raise SystemExit("gpt_bench.py: --toggle-every needs libmemtrace-bench-toggle.so preloaded "
                             "(%s not found)" % name)
        switch.argtypes = [ctypes.c_int]
        switch.restype = None
        switches.append(switch)
    return switches


def toggle_states_problem(states):
    """What is wrong with a --toggle-states list, or None."""
    for state in states:
        if state not in ("off", "memtrace", "recorder") and not (
                state.startswith("memtrace") and state[len("memtrace"):].isdigit()):
            return "unknown state %r (off, memtrace, memtraceK, recorder)" % state
    if len(set(states)) != len(states) or "off" not in states or len(states) < 2:
        return "each state at most once, off among them, at least two"
    return None


def frames_of(state):
    """The native depth under Python that a "memtraceK" state asks for; -1 (the configured one) otherwise."""
    suffix = state[len("memtrace"):] if state.startswith("memtrace") else ""
    return int(suffix) if suffix else -1


def block_state(block, states):
    """The state of timed block `block` (0, 1, ...): groups of len(states) blocks, each a permutation of the
    states, running through every permutation in turn. Two states: memtrace, off, off, memtrace, memtrace, ...
    K states: every state in every position of a group equally often over K! groups."""
    orders = list(itertools.permutations(states))
    return orders[(block // len(states)) % len(orders)][block % len(states)]


def state_switch(torch, states):
    """A function entering one state: memtrace_bench_set_recording, memtrace_bench_set_max_frames_python and,
    where the recorder is one of the states, PyTorch's recorder on (stacks="python", the ring as for --record) or
    off."""
    set_recording, set_frames = bench_switches()
    peer_on = [False]

    def enter(state):
        set_frames(frames_of(state))
        set_recording(1 if state.startswith("memtrace") else 0)
        if "recorder" in states and peer_on[0] != (state == "recorder"):
            if state == "recorder":
                torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks="python")
            else:
                torch.cuda.memory._record_memory_history(enabled=None)
            peer_on[0] = state == "recorder"

    return enter


def build_model(torch, shape, device):
    """Token + position embeddings -> 12 pre-norm encoder layers under a causal mask -> final norm -> logits."""
    nn = torch.nn

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            d = shape["d_model"]
            self.tokens = nn.Embedding(shape["vocab"], d)
            self.positions = nn.Embedding(shape["seq"], d)
            layer = nn.TransformerEncoderLayer(d, shape["heads"], dim_feedforward=shape["ffn"], batch_first=True,
                                               norm_first=True, activation="gelu")
            # Nested tensors apply to padded inference only; pre-norm layers cannot use them anyway.
            self.encoder = nn.TransformerEncoder(layer, shape["layers"], enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, shape["vocab"], bias=False)
            self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(shape["seq"]),
                                 persistent=False)

        def forward(self, x):
            positions = torch.arange(x.shape[1], device=x.device)
            h = self.tokens(x) + self.positions(positions)
            h = self.encoder(h, mask=self.causal_mask, is_causal=True)
            return self.head(self.norm(h))

    return GPT().to(device)


def make_step(torch, model, optimizer, shape, device):
    """A closure running one training step on a fresh random batch."""
    F = torch.nn.functional
    vocab, batch, seq = shape["vocab"], shape["batch"], shape["seq"]

    def step():
        x = torch.randint(0, vocab, (batch, seq), device=device)
        y = torch.randint(0, vocab, (batch, seq), device=device)
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def snapshot_entries(path):
    """Allocator events kept in a _dump_snapshot pickle: every device's trace ring, added up."""
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    return sum(len(events) for events in snapshot.get("device_traces", []))


def run(args):
    import torch

    device = args.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpt_bench.py: --device cuda but torch.cuda.is_available() is False")
    if args.record != "none":
        torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks=args.record)

    shape = TINY_SHAPE if args.tiny else FULL_SHAPE
    torch.manual_seed(0)
    model = build_model(torch, shape, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    step = make_step(torch, model, optimizer, shape, device)

    states = args.toggle_states
    switch = state_switch(torch, states) if args.toggle_every else None
    for _ in range(args.warmup):
        step()
    step_ms, issue_ms, issue_cpu_ms, step_state = [], [], [], []
    for i in range(args.steps):
        if switch:
            state = block_state(i // args.toggle_every, states)
            switch(state)
            step_state.append(state)
        sync()
        t0, cpu0 = time.perf_counter(), time.process_time()
        step()
        t1, cpu1 = time.perf_counter(), time.process_time()
        sync()
        step_ms.append((time.perf_counter() - t0) * 1e3)
        issue_ms.append((t1 - t0) * 1e3)
        issue_cpu_ms.append((cpu1 - cpu0) * 1e3)
    if switch:
        switch("memtrace")

    result = {
        "record": args.record,
        "tiny": args.tiny,
        "device": device,
        "warmup_steps": args.warmup,
        "steps": args.steps,
        "step_ms": step_ms,
        "median_step_ms": statistics.median(step_ms),
        "issue_ms": issue_ms,
        "issue_cpu_ms": issue_cpu_ms,
        "toggle_every": args.toggle_every,
        "toggle_states": states if switch else None,
        "step_state": step_state if switch else None,
        "torch_version": torch.__version__,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "gpu": None,
        "allocator_backend": None,
        "max_memory_allocated_bytes": None,
        "max_memory_reserved_bytes": None,
        "dump_snapshot_s": None,
        "snapshot_bytes": None,
        "snapshot_entries": None,
    }
    if device == "cuda":
        result["gpu"] = torch.cuda.get_device_name(0)
        result["allocator_backend"] = torch.cuda.get_allocator_backend()
        result["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    if args.record != "none":
        t0 = time.perf_counter()
        torch.cuda.memory._dump_snapshot(args.snapshot)
        result["dump_snapshot_s"] = time.perf_counter() - t0
        torch.cuda.memory._record_memory_history(enabled=None)
        result["snapshot_bytes"] = os.path.getsize(args.snapshot)
        result["snapshot_entries"] = snapshot_entries(args.snapshot)
    return result


def main(argv):
    args = parse_args(argv)
    result = run(args)
    result["wall_s"] = time.perf_counter() - START_S
    with open(args.result, "w") as f:
        json.dump(result, f, indent=1)
    print("gpt_bench: record=%s backend=%s median step %.2f ms over %d steps (after %d warm-up)"
          % (result["record"], result["allocator_backend"], result["median_step_ms"], result["steps"],
             result["warmup_steps"]))


if __name__ == "__main__":
    main(sys.argv[1:])
