"""DEVICE_USAGE samples (MiB = 1048576, every device 1024 MiB), read back with dump_events.

The fake NVML (tests/fakecuda/nvml.cc) reports, per device: this process = what the double charged to the
device + FAKENVML_CONTEXT_BYTES (300 MiB here); another process (pid 1) = FAKENVML_OTHER_PROCESS_BYTES
(100 MiB on device 0, 200 MiB on device 1); free = 1024 - both.

--mode oom_nvml (device_usage oom, NVML found, MEMTRACE_FLUSH_MS=60000 so the writer never samples before
exit): 8 MiB on device 0, 16 MiB on device 1, a 2048 MiB request on device 1 fails.
  OOM (CUDA_MALLOC, device 1), then right after it, from the same thread, DEVICE_USAGE api CUDA_MALLOC:
    free/total from cuMemGetInfo = 1024 - 16 = 1008 MiB / 1024 MiB; process 16 + 300 = 316 MiB; others 200 MiB.
  At exit, one NVML_SAMPLE per device seen, on the exiting thread:
    device 0: free 1024 - (8 + 300 + 100) = 616 MiB, process 308 MiB, others 100 MiB;
    device 1: free 1024 - (16 + 300 + 200) = 508 MiB, process 316 MiB, others 200 MiB.
--mode oom_nvml_off (MEMTRACE_NVML=0) and oom_without_nvml (no libnvidia-ml.so.1 to find): only the DEVICE_USAGE
  after the OOM, 1008 / 1024 MiB, without process figures.
--mode oom_other_pid (NVML lists this process under another pid, as it lists host pids to a process in a
  container): the same three DEVICE_USAGE as oom_nvml, with NVML's free/total but without process figures
  (one of the "other" processes is us: counting it as another would blame it for our own memory).
--mode periodic (device_usage wait, MEMTRACE_FLUSH_MS=50, no context or other process): 8 MiB on device 0, then
  the writer thread's sample (free 1016 MiB, process 8 MiB, others 0) on a thread that is not the program's,
  then the exit sample (the same figures) on the program's thread; the intervals in between recorded no
  event, so they have no sample.
"""

import e2e_lib
from e2e_lib import MIB


def add_arguments(parser):
    parser.add_argument("--mode", choices=("oom_nvml", "oom_nvml_off", "oom_without_nvml", "oom_other_pid", "periodic"),
                        required=True)
    parser.add_argument("--nvml-dir", required=True)


case = e2e_lib.Case(add_arguments)
mode = case.args.mode
env = {"MEMTRACE_FLUSH_MS": "60000", "FAKENVML_CONTEXT_BYTES": str(300 * MIB),
       "FAKENVML_OTHER_PROCESS_BYTES": f"{100 * MIB},{200 * MIB}"}
if mode != "oom_without_nvml":
    env["LD_LIBRARY_PATH"] = case.args.fake_lib_dir + ":" + case.args.nvml_dir
if mode == "oom_nvml_off":
    env["MEMTRACE_NVML"] = "0"
if mode == "oom_other_pid":
    env["FAKENVML_OWN_PID"] = "4194304"  # PID_MAX_LIMIT: every Linux pid is below it, so this is never ours
if mode == "periodic":
    env.update({"MEMTRACE_FLUSH_MS": "50", "FAKENVML_CONTEXT_BYTES": "0", "FAKENVML_OTHER_PROCESS_BYTES": ""})
_, trace = case.run_traced([case.program("device_usage"), "wait" if mode == "periodic" else "oom"], env)

events = case.dump_events(trace)
main_tid = events[0]["tid"] if events else None

FIELDS = ("kind", "api", "device", "device_free_bytes", "device_total_bytes", "process_used_bytes",
          "other_processes_used_bytes")


def usage(api, device, free, process=None, others=None):
    row = {"kind": "DEVICE_USAGE", "api": api, "device": device, "device_free_bytes": free,
           "device_total_bytes": 1024 * MIB}
    if process is not None:
        row.update(process_used_bytes=process, other_processes_used_bytes=others)
    return row


def alloc(device, size):
    return {"kind": "ALLOC", "api": "CUDA_MALLOC", "device": device, "size": size}


def oom(device, size):
    return {"kind": "OOM", "api": "CUDA_MALLOC", "device": device, "size": size}


if mode == "oom_nvml":
    expected = [alloc(0, 8 * MIB), alloc(1, 16 * MIB), oom(1, 2048 * MIB),
                usage("CUDA_MALLOC", 1, 1008 * MIB, 316 * MIB, 200 * MIB),
                usage("NVML_SAMPLE", 0, 616 * MIB, 308 * MIB, 100 * MIB),
                usage("NVML_SAMPLE", 1, 508 * MIB, 316 * MIB, 200 * MIB)]
    threads = ["main"] * 6
elif mode == "oom_other_pid":
    expected = [alloc(0, 8 * MIB), alloc(1, 16 * MIB), oom(1, 2048 * MIB), usage("CUDA_MALLOC", 1, 1008 * MIB),
                usage("NVML_SAMPLE", 0, 616 * MIB), usage("NVML_SAMPLE", 1, 508 * MIB)]
    threads = ["main"] * 6
elif mode in ("oom_nvml_off", "oom_without_nvml"):
    expected = [alloc(0, 8 * MIB), alloc(1, 16 * MIB), oom(1, 2048 * MIB), usage("CUDA_MALLOC", 1, 1008 * MIB)]
    threads = ["main"] * 4
else:
    expected = [alloc(0, 8 * MIB), usage("NVML_SAMPLE", 0, 1016 * MIB, 8 * MIB, 0),
                usage("NVML_SAMPLE", 0, 1016 * MIB, 8 * MIB, 0)]
    threads = ["main", "writer", "main"]

case.check("event count", len(expected), len(events))
for i, (want, got) in enumerate(zip(expected, events)):
    keys = set(want) | ({"process_used_bytes", "other_processes_used_bytes"} if want["kind"] == "DEVICE_USAGE"
                        else set())
    case.check(f"event {i}", {k: want.get(k) for k in sorted(keys)}, {k: got.get(k) for k in sorted(keys)})
    thread = "main" if got["tid"] == main_tid else "writer"
    case.check(f"event {i} thread", threads[i], thread)
case.finish()
