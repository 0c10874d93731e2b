"""`memtrace oom` with NVML: the `oom` program (40 MiB = 41943040 held, then 100 MiB = 104857600 requested)
under the fake NVML of tests/fakecuda/nvml.cc, which says this process uses its 40 MiB plus
FAKENVML_CONTEXT_BYTES = 2 MiB (2097152) of context: 42 MiB (44040192), and another process
FAKENVML_OTHER_PROCESS_BYTES of the device.

1. A 128 MiB (134217728) device, the other process at 32 MiB (33554432): cuMemGetInfo after the failure says
   128 - 40 = 88 MiB free (92274688); accounted = the driver total, 40 MiB, so 42 - 40 = 2 MiB are context and
   unattributed. Diagnosis: another process holds the memory: 32 MiB is not more than this process's 40 MiB,
   but is 32 / 128 = 25% of the device (the threshold), and the 100 MiB requested exceed the 88 MiB free.
   Live allocations are 40 / 128 = 31% of the device, under live_tensors' 80%.
2. A 64 MiB device, the other process at 16 MiB (25% again): the request alone exceeds the device (100 > 64
   MiB), and that is the only cause named: no other process freeing its memory would have made room.
"""
import os

import e2e_lib
from e2e_lib import MIB


def add_arguments(parser):
    parser.add_argument("--nvml-dir", required=True)


case = e2e_lib.Case(add_arguments)


def oom_report(label, device_bytes, other_bytes):
    _, trace = case.run_traced([case.program("oom")], {
        "FAKECUDA_TOTAL_BYTES": str(device_bytes), "FAKECUDA_DEVICES": "1",
        "LD_LIBRARY_PATH": case.args.fake_lib_dir + ":" + case.args.nvml_dir,
        "FAKENVML_CONTEXT_BYTES": str(2 * MIB), "FAKENVML_OTHER_PROCESS_BYTES": str(other_bytes)})
    report = case.analyze("oom", trace)
    os.remove(trace)  # run_traced expects the run's own trace alone in the output directory
    case.check(f"{label}: oom_count", 1, report.get("oom_count"))
    ooms = report.get("ooms", [])
    return ooms[0] if ooms else {}


oom = oom_report("other_process", 128 * MIB, 32 * MIB)
usage = oom.get("device_usage") or {}
case.check("ooms[0].device_usage", {"api": "CUDA_MALLOC", "after_oom": True, "device_free_bytes": 88 * MIB,
                                    "device_total_bytes": 128 * MIB, "process_used_bytes": 42 * MIB,
                                    "other_processes_used_bytes": 32 * MIB, "accounted_bytes": 40 * MIB,
                                    "context_and_unattributed_bytes": 2 * MIB},
           {k: v for k, v in usage.items() if k != "time_s"})
case.check("ooms[0].driver_bytes", 40 * MIB, oom.get("driver_bytes"))
case.check("ooms[0].diagnoses", [
    {"cause": "other_processes",
     "text": "another process holds the memory: other processes use 32.00 MiB of the device's 128.00 MiB (25%), "
             "this process holds 40.00 MiB from CUDA; 100.00 MiB requested, 88.00 MiB free"}],
    oom.get("diagnoses"))

oom = oom_report("larger_than_device", 64 * MIB, 16 * MIB)
case.check("larger than the device: diagnoses", [
    {"cause": "request_exceeds_device",
     "text": "the request alone is larger than the device: 100.00 MiB requested, the device has 64.00 MiB in all"}],
    oom.get("diagnoses"))
case.finish()
