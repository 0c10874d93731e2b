"""A Python job started without memtrace, into which `memtrace attach` loads the tracer (check_attach_cli.py). Its
`torch` is a stand-in over the fake libc10_cuda.so (tests/fakecuda/c10_cuda_allocator.h), so that the injected
tracer's PyTorch snapshot (torch.cuda.memory_snapshot()) lists exactly what the fake allocator holds: every block is
2 MiB, so each segment is one 2 MiB cudaMalloc holding one block, at the block's own address.

Reads one command per line from stdin, waiting in select() with a 10 ms timeout (a system call the injector may
stop at), and answers each on stdout:
  alloc NAME     a 2 MiB block (a new segment, or the cached block of the same size)  -> "ok ADDRESS"
  free NAME      frees it (the block stays cached in its segment)                     -> "ok"
  empty_cache    returns every segment without a live block to cudaFree               -> "ok"
  stats          -> "ok ALLOCATED RESERVED" (the fake allocator's totals of device 0)
  quit           exits 0
"""
import ctypes
import os
import select
import sys
import types

MIB = 1 << 20


class Stats(ctypes.Structure):  # FakeAllocatorStats
    _fields_ = [("allocated_bytes", ctypes.c_uint64), ("reserved_bytes", ctypes.c_uint64),
                ("max_allocated_bytes", ctypes.c_uint64), ("max_reserved_bytes", ctypes.c_uint64)]


cudart = ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_LOCAL)
c10 = ctypes.CDLL("libc10_cuda.so", mode=ctypes.RTLD_LOCAL)
c10.fake_c10_cuda_malloc.restype = ctypes.c_void_p
c10.fake_c10_cuda_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int]
c10.fake_c10_cuda_free.argtypes = [ctypes.c_void_p]
c10.fake_c10_cuda_stats.restype = Stats
c10.fake_c10_cuda_stats.argtypes = [ctypes.c_int]

segments = {}  # address -> live (a block of 2 MiB at the segment's address)
names = {}


def stats():
    return c10.fake_c10_cuda_stats(0)


def snapshot():
    return [{"device": 0, "address": a, "total_size": 2 * MIB, "stream": 0, "is_expandable": False,
             "blocks": [{"address": a, "size": 2 * MIB, "state": "active_allocated" if live else "inactive"}]}
            for a, live in sorted(segments.items())]


torch = types.ModuleType("torch")
cuda = types.ModuleType("torch.cuda")
torch.cuda = cuda
torch._C = types.SimpleNamespace(_cuda_hasPrimaryContext=lambda d: d == 0)
cuda.is_initialized = lambda: True
cuda.get_allocator_backend = lambda: "native"
cuda.memory_snapshot = snapshot
cuda.device_count = lambda: 1
cuda.current_device = lambda: 0
cuda.memory_allocated = lambda d=0: stats().allocated_bytes
cuda.memory_reserved = lambda d=0: stats().reserved_bytes
cuda.mem_get_info = lambda d=0: (1 << 29, 1 << 30)
sys.modules["torch"] = torch
sys.modules["torch.cuda"] = cuda

cudart.cudaSetDevice(0)
print("ready", os.getpid(), flush=True)
pending = b""
while True:
    ready, _, _ = select.select([0], [], [], 0.01)
    if not ready:
        continue
    chunk = os.read(0, 4096)
    if not chunk:
        break
    pending += chunk
    while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        words = line.decode().split()
        if words[0] == "alloc":
            address = c10.fake_c10_cuda_malloc(2 * MIB, 0)
            segments[address] = True
            names[words[1]] = address
            print("ok", address, flush=True)
        elif words[0] == "free":
            address = names.pop(words[1])
            c10.fake_c10_cuda_free(address)
            segments[address] = False
            print("ok", flush=True)
        elif words[0] == "empty_cache":
            c10.fake_c10_cuda_empty_cache()
            for address in [a for a, live in segments.items() if not live]:
                del segments[address]
            print("ok", flush=True)
        elif words[0] == "stats":
            s = stats()
            print("ok", s.allocated_bytes, s.reserved_bytes, flush=True)
        elif words[0] == "quit":
            sys.exit(0)
