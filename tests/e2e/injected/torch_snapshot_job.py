"""A Python job whose `torch` is a stand-in (argv[2] picks its state), into which the injected tracer (argv[1],
libmemtrace-injected-test.so) is loaded with ctypes and asked for PyTorch's live set (injected_live_list): the
snapshot snippet runs in this interpreter for real, under the GIL, from a thread Python never saw. Prints one JSON
object: the call's result, its why and the lines it listed."""
import ctypes
import json
import sys
import threading
import types

KIB = 1024
MIB = 1 << 20


def stand_in_torch(state, tracer):
    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")
    torch.cuda = cuda
    torch._C = types.SimpleNamespace(_cuda_hasPrimaryContext=lambda d: d == 0)
    backend = "cudaMallocAsync" if state.startswith("async") else "native"
    # Device 0: a 2 MiB segment at 0x10000000 with blocks 512 KiB allocated, 512 KiB pending free (freed while a
    # stream used it: already off memory_allocated), 1 MiB inactive; a 4 MiB expandable segment on stream 5 with one
    # 3 MiB block allocated. memory_allocated = 512 KiB + 3 MiB (one block short with state "mismatch").
    segments = [
        {"device": 0, "address": 0x10000000, "total_size": 2 * MIB, "stream": 0, "is_expandable": False,
         "blocks": [{"size": 512 * KIB, "state": "active_allocated"},
                    {"size": 512 * KIB, "state": "active_pending_free"},
                    {"size": MIB, "state": "inactive"}]},
        {"device": 0, "address": 0x20000000, "total_size": 4 * MIB, "stream": 5, "is_expandable": True,
         "blocks": [{"address": 0x20000000, "size": 3 * MIB, "state": "active_allocated"},
                    {"address": 0x20300000, "size": MIB, "state": "inactive"}]},
    ]
    allocated = 512 * KIB + 3 * MIB + (KIB if state == "mismatch" else 0)
    cuda.is_initialized = lambda: state != "uninitialized"
    cuda.get_allocator_backend = lambda: backend
    cuda.memory_snapshot = lambda: segments
    cuda.device_count = lambda: 2
    cuda.current_device = lambda: 0
    readings = []

    def memory_allocated(d):
        # "async-racing": the first 3 readings each see one more pool event counted while the snippet ran, as if a
        # cudaMallocAsync of 1 KiB had come between the tracer's two counts; "async-never-settles": every reading.
        if d != 0:
            return 0
        readings.append(d)
        if state == "async-never-settles" or (state == "async-racing" and len(readings) <= 3):
            tracer.memtrace_test_pool_events_add(ctypes.c_uint64(1))
        return allocated + (len(readings) - 1) * KIB if state.startswith("async-") else allocated

    cuda.memory_allocated = memory_allocated
    cuda.memory_reserved = lambda d: 6 * MIB if d == 0 else 0
    cuda.mem_get_info = lambda d: (70 * MIB, 80 * MIB)
    return torch, cuda


def main():
    library, state = sys.argv[1], sys.argv[2]
    tracer = ctypes.CDLL(library)  # the GIL is released during the call, as while the job runs
    if state != "no-torch":
        torch, cuda = stand_in_torch(state, tracer)
        sys.modules["torch"] = torch
        sys.modules["torch.cuda"] = cuda
    out = ctypes.create_string_buffer(4096)
    why = ctypes.create_string_buffer(256)
    result = {}

    def control_thread():  # the tracer's control thread is not a Python thread
        result["complete"] = tracer.memtrace_test_injected_live_list(out, 4096, why, 256)

    thread = threading.Thread(target=control_thread)
    thread.start()
    thread.join()
    print(json.dumps({"complete": result["complete"], "why": why.value.decode(),
                      "lines": out.value.decode().splitlines()}))


main()
