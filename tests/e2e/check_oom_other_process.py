"""`memtrace oom` with NVML: the `oom` program (one device of 64 MiB = 67108864 bytes, 40 MiB = 41943040 held,
100 MiB = 104857600 requested while 24 MiB = 25165824 are free) under the fake NVML of tests/fakecuda/nvml.cc,
which says another process uses FAKENVML_OTHER_PROCESS_BYTES = 16 MiB (16777216) of the device and this process
its 40 MiB plus FAKENVML_CONTEXT_BYTES = 2 MiB (2097152) of context: 42 MiB (44040192).

The hook's DEVICE_USAGE right after the failure carries cuMemGetInfo's 24 MiB free of 64 MiB and NVML's
figures: this process 42 MiB, others 16 MiB; accounted = the driver total, 40 MiB, so 42 - 40 = 2 MiB are
context and unattributed. Diagnosis, in order: the request alone exceeds the device (100 > 64 MiB); another
process holds the memory: 16 MiB is not more than this process's 40 MiB, but is 16 / 64 = 25% of the device
(the threshold), and the 100 MiB requested exceed the 24 MiB free.
"""
import e2e_lib
from e2e_lib import MIB


def add_arguments(parser):
    parser.add_argument("--nvml-dir", required=True)


case = e2e_lib.Case(add_arguments)
_, trace = case.run_traced([case.program("oom")], {
    "FAKECUDA_TOTAL_BYTES": str(64 * MIB), "FAKECUDA_DEVICES": "1",
    "LD_LIBRARY_PATH": case.args.fake_lib_dir + ":" + case.args.nvml_dir,
    "FAKENVML_CONTEXT_BYTES": str(2 * MIB), "FAKENVML_OTHER_PROCESS_BYTES": str(16 * MIB)})
report = case.analyze("oom", trace)
case.check("oom_count", 1, report.get("oom_count"))
ooms = report.get("ooms", [])
oom = ooms[0] if ooms else {}
usage = oom.get("device_usage") or {}
case.check("ooms[0].device_usage", {"api": "CUDA_MALLOC", "after_oom": True, "device_free_bytes": 24 * MIB,
                                    "device_total_bytes": 64 * MIB, "process_used_bytes": 42 * MIB,
                                    "other_processes_used_bytes": 16 * MIB, "accounted_bytes": 40 * MIB,
                                    "context_and_unattributed_bytes": 2 * MIB},
           {k: v for k, v in usage.items() if k != "time_s"})
case.check("ooms[0].driver_bytes", 40 * MIB, oom.get("driver_bytes"))
case.check("ooms[0].diagnoses", [
    {"cause": "request_exceeds_device",
     "text": "the request alone is larger than the device: 100.00 MiB requested, the device has 64.00 MiB in all"},
    {"cause": "other_processes",
     "text": "another process holds the memory: other processes use 16.00 MiB of the device's 64.00 MiB (25%), "
             "this process holds 40.00 MiB from CUDA; 100.00 MiB requested, 24.00 MiB free"}],
    oom.get("diagnoses"))
case.finish()
