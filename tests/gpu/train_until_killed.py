"""train_leak.py's training loop, reporting each completed step, to be killed with SIGKILL by scripts/gpu-check.

    python3 train_until_killed.py PROGRESS_FILE START_JSON [--steps N]

Trains train_leak.py's model with its train_step (whose `losses.append(...)  # leak` line keeps one loss block
per step) for N steps (default 400, far more than gpu-check waits for).
START_JSON, written before the first step: pid, leak_file, leak_line, steps planned.
PROGRESS_FILE: after each step (synchronized, so its loss block was allocated before), one line
"STEPS_COMPLETED UNIX_TIME_S", flushed and fsync'ed before the next step starts. After a kill -9 the file's last
line is the number of steps completed, and the time of each line bounds when that step's allocations were made.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402 (after the path of train_leak.py)

import train_leak  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("progress", help="file that gets one line per completed step")
    parser.add_argument("start", help="JSON file written before the first step")
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()

    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = train_leak.TinyLM().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with open(args.start, "w") as f:
        json.dump({"pid": os.getpid(), "leak_file": os.path.abspath(train_leak.__file__),
                   "leak_line": train_leak.leak_line(), "steps_planned": args.steps}, f, indent=1)

    with open(args.progress, "a") as progress:
        for completed in range(1, args.steps + 1):
            train_leak.train_step(model, optimizer, device)
            torch.cuda.synchronize(device)
            progress.write(f"{completed} {time.time():.6f}\n")
            progress.flush()
            os.fsync(progress.fileno())
    print(f"train_until_killed: all {args.steps} steps done, nobody killed this process")


if __name__ == "__main__":
    main()
