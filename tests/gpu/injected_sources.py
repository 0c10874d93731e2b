"""The injected tracer's sources in a real PyTorch job (preload/attach/injected_sources.h), on the GPU machine.

argv[1]: libmemtrace-injected-test.so. PYTORCH_CUDA_ALLOC_CONF picks the allocator. The job allocates a 64 MiB
tensor and a 1 KiB one before the tracer is loaded, then loads it with ctypes (as the injector's dlopen would, after
PyTorch created its context and bound every entry point), switches the sources on, lists the live set from a thread
Python never saw, allocates a 32 MiB tensor, frees it and the 64 MiB one, empties the cache, switches the sources off
and allocates once more. Prints one JSON object, the last line: what enable said, the live list, the allocator's
own figures, and the addresses, which the checker compares with the trace's events (memtrace dump)."""
import ctypes
import json
import sys
import threading

import torch

MIB = 1 << 20

library = sys.argv[1]
before = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
small = torch.empty(1024, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
stats_before = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}

tracer = ctypes.CDLL(library)
why = ctypes.create_string_buffer(256)
layers = tracer.memtrace_test_injected_enable(why, 256)
live = ctypes.create_string_buffer(1 << 20)
live_why = ctypes.create_string_buffer(256)
result = {}


def control_thread():
    result["complete"] = tracer.memtrace_test_injected_live_list(live, 1 << 20, live_why, 256)


thread = threading.Thread(target=control_thread)
thread.start()
thread.join()

during = torch.empty(32 * MIB, dtype=torch.uint8, device="cuda")
during_address = during.data_ptr()
del during
del before
torch.cuda.synchronize()
torch.cuda.empty_cache()
tracer.memtrace_test_injected_disable()
after = torch.empty(16 * MIB, dtype=torch.uint8, device="cuda")  # not recorded
del after
torch.cuda.synchronize()
print(json.dumps({
    "layers": layers, "why": why.value.decode(), "live_complete": result["complete"],
    "live_why": live_why.value.decode(), "live": live.value.decode().splitlines(),
    "stats_before": stats_before, "small": small.data_ptr(), "during": during_address,
    "backend": torch.cuda.get_allocator_backend(),
}))
