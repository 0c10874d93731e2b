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
--mode oom_named_others (as oom_nvml, and FAKENVML_OTHER_PROCESSES lists more processes): device 0 also pid 4242
  (50 MiB) and pid 77 (NVML cannot say), device 1 pid 300 twice (10 + 20 MiB, as per MIG instance) and pid 9
  (30 MiB). Others: device 0 100 + 50 = 150 MiB, device 1 200 + 30 + 30 = 260 MiB; NVML's free: device 0
  1024 - (8 + 300 + 150) = 566 MiB, device 1 1024 - (16 + 300 + 260) = 448 MiB (the OOM's sample: cuMemGetInfo's
  1008 MiB, which knows nothing of other processes).

The NvmlProcesses records (the other processes one by one, by pid, each once) come right before the DEVICE_USAGE
they belong to, only when the device's list changed: in oom_nvml and oom_named_others device 1's list before the
OOM's sample, device 0's before its exit sample, and none before device 1's exit sample (unchanged); none where
NVML lists nobody else (periodic), where this process is not in NVML's list (oom_other_pid) or without NVML.
--mode periodic_others (periodic, with pid 4242 holding 50 MiB on device 0): one list before the writer thread's
  sample (free 1024 - 8 - 50 = 966 MiB, process 8, others 50 MiB) and none before the exit sample (unchanged).
"""

import e2e_lib
from e2e_lib import MIB


def add_arguments(parser):
    parser.add_argument("--mode", choices=("oom_nvml", "oom_nvml_off", "oom_without_nvml", "oom_other_pid", "periodic",
                                           "oom_named_others", "periodic_others"), required=True)
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
if mode == "oom_named_others":
    env["FAKENVML_OTHER_PROCESSES"] = f"4242={50 * MIB},77=na;300={10 * MIB},9={30 * MIB},300={20 * MIB}"
if mode in ("periodic", "periodic_others"):
    env.update({"MEMTRACE_FLUSH_MS": "50", "FAKENVML_CONTEXT_BYTES": "0", "FAKENVML_OTHER_PROCESS_BYTES": ""})
if mode == "periodic_others":
    env["FAKENVML_OTHER_PROCESSES"] = f"4242={50 * MIB}"
periodic = mode.startswith("periodic")
_, trace = case.run_traced([case.program("device_usage"), "wait" if periodic else "oom"], env)

records = case.dump_records(trace)
events = [dict((k, v) for k, v in r.items() if k != "record") for r in records if r["record"] == "event"]
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
elif mode == "oom_named_others":
    expected = [alloc(0, 8 * MIB), alloc(1, 16 * MIB), oom(1, 2048 * MIB),
                usage("CUDA_MALLOC", 1, 1008 * MIB, 316 * MIB, 260 * MIB),
                usage("NVML_SAMPLE", 0, 566 * MIB, 308 * MIB, 150 * MIB),
                usage("NVML_SAMPLE", 1, 448 * MIB, 316 * MIB, 260 * MIB)]
    threads = ["main"] * 6
elif mode in ("oom_nvml_off", "oom_without_nvml"):
    expected = [alloc(0, 8 * MIB), alloc(1, 16 * MIB), oom(1, 2048 * MIB), usage("CUDA_MALLOC", 1, 1008 * MIB)]
    threads = ["main"] * 4
elif mode == "periodic_others":
    expected = [alloc(0, 8 * MIB), usage("NVML_SAMPLE", 0, 966 * MIB, 8 * MIB, 50 * MIB),
                usage("NVML_SAMPLE", 0, 966 * MIB, 8 * MIB, 50 * MIB)]
    threads = ["main", "writer", "main"]
else:
    expected = [alloc(0, 8 * MIB), usage("NVML_SAMPLE", 0, 1016 * MIB, 8 * MIB, 0),
                usage("NVML_SAMPLE", 0, 1016 * MIB, 8 * MIB, 0)]
    threads = ["main", "writer", "main"]


def listed(device, processes):
    """An nvml_processes record as memtrace dump prints it; processes: (pid, used bytes or None)."""
    return {"record": "nvml_processes", "device": device,
            "processes": [{"pid": pid} if used is None else {"pid": pid, "used_bytes": used} for pid, used in processes]}


# The NvmlProcesses records and the DEVICE_USAGE events, in file order (a sample as "usage DEVICE").
lists_and_samples = [r if r["record"] == "nvml_processes" else f"usage {r['device']}" for r in records
                     if r["record"] == "nvml_processes" or (r["record"] == "event" and r["kind"] == "DEVICE_USAGE")]
if mode == "oom_nvml":
    expected_lists = [listed(1, [(1, 200 * MIB)]), "usage 1", listed(0, [(1, 100 * MIB)]), "usage 0", "usage 1"]
elif mode == "oom_named_others":
    expected_lists = [listed(1, [(1, 200 * MIB), (9, 30 * MIB), (300, 30 * MIB)]), "usage 1",
                      listed(0, [(1, 100 * MIB), (77, None), (4242, 50 * MIB)]), "usage 0", "usage 1"]
elif mode == "periodic_others":
    expected_lists = [listed(0, [(4242, 50 * MIB)]), "usage 0", "usage 0"]
else:
    expected_lists = [f"usage {e['device']}" for e in expected if e["kind"] == "DEVICE_USAGE"]
case.check("NvmlProcesses records and DEVICE_USAGE events", expected_lists, lists_and_samples)

case.check("event count", len(expected), len(events))
for i, (want, got) in enumerate(zip(expected, events)):
    keys = set(want) | ({"process_used_bytes", "other_processes_used_bytes"} if want["kind"] == "DEVICE_USAGE"
                        else set())
    case.check(f"event {i}", {k: want.get(k) for k in sorted(keys)}, {k: got.get(k) for k in sorted(keys)})
    thread = "main" if got["tid"] == main_tid else "writer"
    case.check(f"event {i} thread", threads[i], thread)
case.finish()
