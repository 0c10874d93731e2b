"""A Python program that leaks device memory from a known line, through ctypes and the shared runtime.

Each of the 5 steps allocates a 1 MiB scratch buffer it frees and a 4 MiB buffer it keeps in the
module-level list `kept` (live when the interpreter starts finalizing). The checker finds the lines
by their markers, so the file can change without touching the expected values.
"""
import ctypes

MIB = 1 << 20
STEPS = 5

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]


def device_malloc(nbytes):
    ptr = ctypes.c_void_p()
    err = cudart.cudaMalloc(ctypes.byref(ptr), nbytes)  # marker: cudaMalloc call
    if err != 0:
        raise RuntimeError(f"cudaMalloc({nbytes}) failed with {err}")
    return ptr.value


kept = []


def step():
    scratch = device_malloc(1 * MIB)
    kept.append(device_malloc(4 * MIB))  # marker: leak
    cudart.cudaFree(ctypes.c_void_p(scratch))


for _ in range(STEPS):
    step()
print(f"kept {len(kept)} blocks of {4 * MIB} bytes")
