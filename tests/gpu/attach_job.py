"""Issue 21's GPU job: attach to a running PyTorch training loop, detach, attach again.

  attach_job.py train --steps N --samples FILE --progress FILE
      The training loop (the job memtrace attaches to; it never calls memtrace). Each step: forward, backward,
      Adam, torch.cuda.synchronize(), then its own torch.cuda figures (memory_allocated, memory_reserved) and the
      wall-clock time, with 5 ms of quiet on either side so that no allocation shares the sample's moment. Every 10th
      step keeps 1 MiB for good (memory that creeps); every 25th makes and drops a 96 MiB temporary (a new segment:
      driver-layer calls while attached). Deterministic (torch.use_deterministic_algorithms), so that two runs end
      with the same loss. Writes the samples and the losses to --samples at the end.

  attach_job.py launch --mode injected|dormant --conf CONF --memtrace BIN --lib LIBMEMTRACE --dir DIR
      Runs the loop twice under PYTORCH_CUDA_ALLOC_CONF=CONF: once untraced (the reference), once attached:
        injected: started without memtrace; `memtrace attach` loads the tracer into it;
        dormant:  started with the tracer preloaded and MEMTRACE_START=dormant.
      The attached run: attach at step >= 20, detach at step >= 70, attach again at >= 100, detach at >= 160; the job
      runs on to its end untraced. Writes DIR/reference.json, DIR/attached.json (the two runs' samples) and
      DIR/launch.json (the commands' exit codes and output, the step at which each one returned).
      --profile: both runs train under torch.profiler.profile(activities=[CPU, CUDA]) from the first step to the
      last, so that Kineto holds CUPTI while memtrace attaches.
"""
import contextlib
import argparse
import json
import os
import subprocess
import sys
import time


def train(args):
    import torch

    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda:0")
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.randn(256, 1024, device=dev)
    target = torch.randint(0, 10, (256,), device=dev)
    kept = []
    samples, losses = [], []

    def progress(step):
        with open(args.progress + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(args.progress + ".tmp", args.progress)

    profiler = contextlib.nullcontext()
    if args.profile:
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        profiler = torch.profiler.profile(activities=activities)
    with profiler:
        train_steps(args, torch, dev, model, opt, data, target, kept, samples, losses, progress)
    with open(args.samples, "w") as f:
        json.dump({"pid": os.getpid(), "samples": samples, "losses": losses,
                   "backend": torch.cuda.get_allocator_backend()}, f)


def train_steps(args, torch, dev, model, opt, data, target, kept, samples, losses, progress):
    for step in range(1, args.steps + 1):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            kept.append(torch.empty(1 << 18, device=dev))  # 1 MiB kept for good
        if step % 25 == 0:
            tmp = torch.empty(24 << 20, device=dev)  # 96 MiB: a segment of its own
            del tmp
        losses.append(loss.item())
        torch.cuda.synchronize()
        time.sleep(0.005)
        samples.append({"step": step, "monotonic_ns": time.monotonic_ns(), "allocated": torch.cuda.memory_allocated(dev),
                        "reserved": torch.cuda.memory_reserved(dev)})
        time.sleep(0.005)
        progress(step)
        time.sleep(0.015)


def wait_step(progress, at_least, proc, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            return None
        try:
            with open(progress) as f:
                step = int(f.read() or 0)
            if step >= at_least:
                return step
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    return None


def current_step(progress):
    try:
        with open(progress) as f:
            return int(f.read() or 0)
    except (OSError, ValueError):
        return None


def launch(args):
    os.makedirs(args.dir, exist_ok=True)
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=args.conf, CUBLAS_WORKSPACE_CONFIG=":4096:8")
    env.pop("LD_PRELOAD", None)
    me = [sys.executable, os.path.abspath(__file__), "train", "--steps", str(args.steps)]
    if args.profile:
        me.append("--profile")

    ref = subprocess.run(me + ["--samples", f"{args.dir}/reference.json", "--progress", f"{args.dir}/ref.progress"],
                         env=env, capture_output=True, text=True, timeout=args.timeout)
    log = {"reference_rc": ref.returncode, "reference_stdout": ref.stdout[-2000:], "reference_stderr": ref.stderr[-4000:],
           "commands": []}

    job_env = dict(env)
    if args.mode == "dormant":
        job_env.update(LD_PRELOAD=args.lib, MEMTRACE_START="dormant")
    progress = f"{args.dir}/job.progress"
    job = subprocess.Popen(me + ["--samples", f"{args.dir}/attached.json", "--progress", progress], env=job_env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pattern = f"{args.dir}/traces/attach-%p.mtrace"
    os.makedirs(f"{args.dir}/traces", exist_ok=True)
    plan = [("attach", 20), ("detach", 70), ("attach", 100), ("detach", 160)]
    for command, step in plan:
        if wait_step(progress, step, job) is None:
            log["commands"].append({"command": command, "rc": None, "error": f"job never reached step {step}"})
            break
        argv = [args.memtrace, command] + (["-o", pattern] if command == "attach" else []) + [str(job.pid)]
        before = current_step(progress)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        log["commands"].append({"command": command, "argv": argv, "rc": r.returncode, "stdout": r.stdout,
                                "stderr": r.stderr, "step_before": before, "step_after": current_step(progress)})
    out, err = job.communicate(timeout=args.timeout)
    log.update(job_rc=job.returncode, job_stdout=out[-2000:], job_stderr=err[-4000:], pid=job.pid)
    with open(f"{args.dir}/launch.json", "w") as f:
        json.dump(log, f, indent=1)
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("train")
    t.add_argument("--steps", type=int, default=200)
    t.add_argument("--samples", required=True)
    t.add_argument("--progress", required=True)
    t.add_argument("--profile", action="store_true")
    l = sub.add_parser("launch")
    l.add_argument("--mode", choices=["injected", "dormant"], required=True)
    l.add_argument("--conf", default="")
    l.add_argument("--memtrace", required=True)
    l.add_argument("--lib", required=True)
    l.add_argument("--dir", required=True)
    l.add_argument("--steps", type=int, default=200)
    l.add_argument("--timeout", type=int, default=100)
    l.add_argument("--profile", action="store_true")
    args = p.parse_args()
    return train(args) if args.what == "train" else launch(args)


if __name__ == "__main__":
    sys.exit(main())
