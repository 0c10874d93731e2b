"""A short training loop profiled with torch.profiler (CPU + CUDA activities, profile_memory=True), for gpu-check.

    python3 profiler_job.py --truth TRUTH_JSON --chrome-trace CHROME_JSON

gpu-check runs it once without and once with memtrace: both tools watch the same allocations (memtrace through
the driver and PyTorch's allocator hook, the profiler through CUPTI and the same allocator's reports), and the
profiler must see the same thing either way. One transformer layer with AdamW runs WARMUP steps unprofiled
(cuBLAS handles, optimizer state), then STEPS steps under the profiler. The profiler's trace is exported in
Chrome format and the truth file summarizes it:
  kernel_names, kernel_events          distinct names and number of events of category "kernel" (CUDA kernels)
  memory_events, cuda_memory_events    "[memory]" events (allocations and frees the profiler recorded), all / CUDA
  warnings                             the Python warnings raised while profiling (e.g. "Failed to recover ...")
  max_memory_allocated_bytes           torch.cuda.max_memory_allocated() at the end
"""
import argparse
import json
import os
import sys
import warnings

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

D_MODEL = 256
HEADS = 4
BATCH = 32
SEQ = 128
WARMUP = 3
STEPS = 5
# The "Device Type" a "[memory]" event carries for a CUDA device: c10::DeviceType::CUDA, written as a number.
CUDA_DEVICE_TYPE = "1"


def step(layer, optimizer, device):
    x = torch.randn(BATCH, SEQ, D_MODEL, device=device)
    layer(x).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def summarize(chrome_trace_path):
    """Kernel names and memory event counts of an exported Chrome trace."""
    with open(chrome_trace_path) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    cuda_memory = [e for e in memory if str(e.get("args", {}).get("Device Type")) == CUDA_DEVICE_TYPE]
    return {
        "kernel_names": sorted({e["name"] for e in kernels}),
        "kernel_events": len(kernels),
        "memory_events": len(memory),
        "cuda_memory_events": len(cuda_memory),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truth", required=True, help="where to write the JSON side file")
    parser.add_argument("--chrome-trace", required=True, help="where the profiler exports its trace")
    args = parser.parse_args()

    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=4 * D_MODEL, batch_first=True).to(device)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    for _ in range(WARMUP):
        step(layer, optimizer, device)
    torch.cuda.synchronize(device)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True) as prof:
            for _ in range(STEPS):
                step(layer, optimizer, device)
            torch.cuda.synchronize(device)
        prof.export_chrome_trace(args.chrome_trace)
    # Shown again, so that the job's output holds every warning as it would without the catch.
    for w in caught:
        print(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}", file=sys.stderr)

    truth = summarize(args.chrome_trace)
    truth.update({
        "pid": os.getpid(),
        "warnings": [str(w.message) for w in caught],
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "torch_version": torch.__version__,
    })
    with open(args.truth, "w") as f:
        json.dump(truth, f, indent=1)
    print(f"profiler_job: {len(truth['kernel_names'])} kernel names in {truth['kernel_events']} kernel events, "
          f"{truth['memory_events']} memory events ({truth['cuda_memory_events']} CUDA), "
          f"{len(caught)} warnings, max allocated {truth['max_memory_allocated_bytes']} B")


if __name__ == "__main__":
    main()
