"""What identifies a traced process in a job (TraceStart.rank, local_rank, world_size, job_id, job_id_source) and
each device it used (Device records: the driver's UUID, name, total memory), read back by `memtrace dump`.

Run 1, as torchrun under Slurm would start rank 3 of 8: RANK=3 LOCAL_RANK=1 WORLD_SIZE=8 SLURM_JOB_ID=12345, with
TORCHELASTIC_RUN_ID=run-7 as well (SLURM_JOB_ID wins). runtime_two_devices allocates on devices 0 and 1 of the
test double, whose cuDeviceGetUuid gives "fakecudauuid" and the ordinal as a big-endian u32
(tests/fakecuda/driver_pools.cc), cuDeviceGetName "fakecuda device N", and cuDeviceTotalMem FAKECUDA_TOTAL_BYTES.
Run 2: values that are not whole numbers below 2^32 (RANK=3x, LOCAL_RANK empty, WORLD_SIZE=4294967296) leave
the fields out; without SLURM_JOB_ID the job id is TORCHELASTIC_RUN_ID's. The analyzer's reports do not show
these fields: `memtrace summary --json` of run 1 has the same keys as that of run 3, without any of the variables.
"""
import os

import e2e_lib

case = e2e_lib.Case()
program = [case.program("runtime_two_devices")]
total_bytes = 1 << 30


def fake_uuid(ordinal):
    return (b"fakecudauuid" + ordinal.to_bytes(4, "big")).hex()


def expected_devices():
    return [{"record": "device", "ordinal": d, "uuid": fake_uuid(d), "name": f"fakecuda device {d}",
             "total_bytes": total_bytes} for d in (0, 1)]


def traced(extra_env):
    _, trace = case.run_traced(program, dict(extra_env, FAKECUDA_TOTAL_BYTES=str(total_bytes)))
    records = case.dump_start(trace)
    summary = case.analyze("summary", trace)
    os.remove(trace)  # the next run_traced expects one trace in the directory
    return records, summary


records, summary_with = traced({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_JOB_ID": "12345",
                                "TORCHELASTIC_RUN_ID": "run-7"})
starts = [r for r in records if r["record"] == "start"]
case.check("run 1: one TraceStart", 1, len(starts))
start = starts[0] if starts else {}
case.check("run 1: rank", 3, start.get("rank"))
case.check("run 1: local_rank", 1, start.get("local_rank"))
case.check("run 1: world_size", 8, start.get("world_size"))
case.check("run 1: job_id", "12345", start.get("job_id"))
case.check("run 1: job_id_source", "SLURM_JOB_ID", start.get("job_id_source"))
devices = sorted((r for r in records if r["record"] == "device"), key=lambda r: r["ordinal"])
case.check("run 1: one Device record per device used, the double's UUID", expected_devices(), devices)

records, _ = traced({"RANK": "3x", "LOCAL_RANK": "", "WORLD_SIZE": "4294967296", "SLURM_JOB_ID": "",
                                   "TORCHELASTIC_RUN_ID": "run-7"})
start = next((r for r in records if r["record"] == "start"), {})
case.check("run 2: rank, local_rank, world_size absent", [],
           [k for k in ("rank", "local_rank", "world_size") if k in start])
case.check("run 2: job_id", "run-7", start.get("job_id"))
case.check("run 2: job_id_source", "TORCHELASTIC_RUN_ID", start.get("job_id_source"))
case.check("run 2: Device records", expected_devices(),
           sorted((r for r in records if r["record"] == "device"), key=lambda r: r["ordinal"]))


def keys(value):
    """Every key path of a JSON value (lists by their first element), sorted."""
    if isinstance(value, dict):
        return sorted({f"{k}.{sub}" if sub else k for k, v in value.items() for sub in keys(v) or [""]})
    if isinstance(value, list) and value:
        return keys(value[0])
    return []


# Run 3: none of the variables set.
records, summary_without = traced({name: "" for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_JOB_ID",
                                                         "TORCHELASTIC_RUN_ID")})
start = next((r for r in records if r["record"] == "start"), {})
case.check("run 3: no rank fields, no job id", ({}, "", "JOB_ID_NONE"),
           ({k: start[k] for k in ("rank", "local_rank", "world_size") if k in start}, start.get("job_id"),
            start.get("job_id_source")))
case.check("summary --json: the same keys in run 1 (every field) and run 3 (none)", keys(summary_without),
           keys(summary_with))
case.finish()
