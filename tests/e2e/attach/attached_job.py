"""A Python job started without memtrace, into which `memtrace attach` loads the tracer (check_attach_cli.py). Its
`torch` is a stand-in over the fake libc10_cuda.so (tests/fakecuda/c10_cuda_allocator.h), so that the injected
tracer's PyTorch snapshot (torch.cuda.memory_snapshot()) lists exactly what the fake allocator holds: every block is
2 MiB, so each segment is one 2 MiB cudaMalloc holding one block, at the block's own address.

With argument `cudaMallocAsync` the stand-in is PyTorch's cudaMallocAsync backend instead: blocks are
cudaMallocAsync/cudaFreeAsync of the sizes asked, on the default stream; memory_allocated() and memory_reserved()
are the default pool's used and reserved bytes (as PyTorch's are), and memory_snapshot() fails (as PyTorch's does).
There `alloc NAME BYTES` takes a size, `sync` is cudaStreamSynchronize, and `race NAME BYTES OLD` arms the next
memory_allocated() call to allocate NAME and free OLD first: events that land in the attach window before the
tracer's snapshot reads PyTorch's total.

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
backend = sys.argv[1] if len(sys.argv) > 1 else "native"
armed_race = []  # (name, bytes, old name) for the next memory_allocated() call


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


def pool_attribute(attribute):  # cudaMemPoolAttr: 0x5 ReservedMemCurrent, 0x7 UsedMemCurrent
    pool, value = ctypes.c_void_p(), ctypes.c_uint64()
    cudart.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0)
    cudart.cudaMemPoolGetAttribute(pool, attribute, ctypes.byref(value))
    return value.value


def async_alloc(name, size):
    pointer = ctypes.c_void_p()
    cudart.cudaMallocAsync(ctypes.byref(pointer), ctypes.c_size_t(size), None)
    names[name] = pointer.value
    return pointer.value


def async_free(name):
    cudart.cudaFreeAsync(ctypes.c_void_p(names.pop(name)), None)


def async_memory_allocated(d=0):
    while armed_race:
        name, size, old = armed_race.pop()
        async_alloc(name, size)
        async_free(old)
    return pool_attribute(0x7)


def no_snapshot():
    raise RuntimeError("Calling snapshot with backend:cudaMallocAsync is not meaningful.")


if backend == "cudaMallocAsync":
    cuda.get_allocator_backend = lambda: "cudaMallocAsync"
    cuda.memory_snapshot = no_snapshot
    cuda.memory_allocated = async_memory_allocated
    cuda.memory_reserved = lambda d=0: pool_attribute(0x5)
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
        if backend == "cudaMallocAsync" and words[0] == "alloc":
            print("ok", async_alloc(words[1], int(words[2])), flush=True)
        elif backend == "cudaMallocAsync" and words[0] == "free":
            async_free(words[1])
            print("ok", flush=True)
        elif words[0] == "race":
            armed_race.append((words[1], int(words[2]), words[3]))
            print("ok", flush=True)
        elif words[0] == "sync":
            cudart.cudaStreamSynchronize(None)
            print("ok", flush=True)
        elif backend == "cudaMallocAsync" and words[0] == "stats":
            print("ok", pool_attribute(0x7), pool_attribute(0x5), flush=True)
        elif words[0] == "alloc":
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
