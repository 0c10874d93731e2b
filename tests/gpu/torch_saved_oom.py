"""A PyTorch OOM whose saved exception keeps the failed function's tensors alive, then a second OOM, for
scripts/gpu-check (and the source of examples/torch_oom.mtrace).

    python3 torch_saved_oom.py TRUTH_JSON

`build_activations` allocates most of GPU 0 in tensors held by a local list, then asks for more than is left:
torch.OutOfMemoryError. The handler keeps the exception in a module-level variable (`saved = e`, a common
mistake): its traceback references build_activations' frame, so the local list and every tensor in it stay
alive after the function is gone. The next, moderate request fails too. `memtrace oom` must show, for that
second failure, the line that allocated the held tensors among the call sites holding the most live memory.
The side file holds that line (found with inspect, not hard-coded), the sizes, and PyTorch's figures.
"""
import inspect
import json
import sys

import torch

GiB = 1024 ** 3
CHUNK_BYTES = 8 * GiB
LEFT_FREE_BYTES = 10 * GiB   # what build_activations leaves free: 10 to 18 GiB
SECOND_REQUEST_BYTES = 24 * GiB  # more than the 10 to 18 GiB left

saved = None  # the kept exception: module level, so it lives to the end


def build_activations(device, count):
    held = []
    for _ in range(count):
        held.append(torch.empty(CHUNK_BYTES, dtype=torch.uint8, device=device))  # held by the saved traceback
    free, _ = torch.cuda.mem_get_info(device)
    return torch.empty(free + GiB, dtype=torch.uint8, device=device)  # more than is left: OOM


def held_line():
    """The line of build_activations that allocates the held tensors."""
    lines, first = inspect.getsourcelines(build_activations)
    for offset, text in enumerate(lines):
        if "# held by the saved traceback" in text:
            return first + offset
    raise RuntimeError("torch_saved_oom.py: marker line not found")


def main():
    global saved
    if len(sys.argv) != 2:
        sys.exit("usage: torch_saved_oom.py TRUTH_JSON")
    device = torch.device("cuda:0")
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info(device)
    count = max(1, (free - LEFT_FREE_BYTES) // CHUNK_BYTES)
    try:
        build_activations(device, count)
    except torch.OutOfMemoryError as e:
        saved = e  # the mistake: the traceback keeps build_activations' frame, and `held`, alive
    first_failed = saved is not None
    allocated_between = torch.cuda.memory_allocated(device)
    second_failed = False
    try:
        torch.empty(SECOND_REQUEST_BYTES, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError:
        second_failed = True
    truth = {
        "device": 0,
        "held_file": __file__,
        "held_line": held_line(),
        "held_count": count,
        "held_bytes": count * CHUNK_BYTES,
        "second_request_bytes": SECOND_REQUEST_BYTES,
        "first_failed": first_failed,
        "second_failed": second_failed,
        "allocated_bytes_at_second": allocated_between,
        "device_free_bytes_at_start": free,
        "device_total_bytes": total,
    }
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f, indent=1)
    print(f"torch_saved_oom: {count} x {CHUNK_BYTES} B held by the saved exception; first OOM {first_failed}, "
          f"second OOM {second_failed}")


if __name__ == "__main__":
    main()
