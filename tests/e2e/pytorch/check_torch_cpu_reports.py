"""PyTorch reports CPU blocks through its allocator hook too; memtrace records only CUDA devices.

e2e_torch_cpu_reports reports alloc 4096, alloc 8192, free 4096 with a CPU device and never calls CUDA:
  no trace file; libc10.so still got all 3 calls (memtrace forwards), net 4096 + 8192 - 4096 = 8192 bytes.
"""
import json
import os

import e2e_lib

case = e2e_lib.Case()
stdout, _ = case.run_traced([case.program("torch_cpu_reports")], expect_trace=False)
own = json.loads(stdout.strip().splitlines()[-1])
case.check("files written", [], sorted(os.listdir(case.args.out_dir)))
case.check("libc10 reportMemoryUsageToProfiler calls (memtrace forwarded)", 3, own["memory_usage_calls"])
case.check("libc10 net reported bytes", 8192, own["net_alloc_bytes"])
case.finish()
