"""A process whose allocation fails because ANOTHER process holds most of GPU 0, for scripts/gpu-check.

    python3 oom_other_process.py TRUTH_JSON REQUEST_BYTES

Run while tests/gpu/gpu_holder.py holds all but a few GiB of the device. Asks PyTorch for one tensor of
REQUEST_BYTES (more than is free), catches torch.OutOfMemoryError and exits 0. The side file holds the device's
free/total memory just before the attempt (torch.cuda.mem_get_info) and this process's own use, for comparison with
`memtrace oom --json`: the report must blame the other process, with NVML's figure for it.
"""
import json
import os
import sys

import torch


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: oom_other_process.py TRUTH_JSON REQUEST_BYTES")
    request = int(sys.argv[2])
    device = torch.device("cuda:0")
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info(device)
    message = None
    try:
        torch.empty(request, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError as e:
        message = str(e).splitlines()[0]
    truth = {
        "device": 0,
        "pid": os.getpid(),
        "request_bytes": request,
        "device_free_bytes_before": free,
        "device_total_bytes": total,
        "failed": message is not None,
        "torch_message": message,
        "allocated_bytes": torch.cuda.memory_allocated(device),
        "reserved_bytes": torch.cuda.memory_reserved(device),
    }
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f, indent=1)
    print(f"oom_other_process: request {request} B with {free} B free: "
          f"{'failed as expected' if message else 'SUCCEEDED (no OOM)'}")


if __name__ == "__main__":
    main()
