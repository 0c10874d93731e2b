"""A Python program that leaks device memory for good, through ctypes and the shared runtime: the
pointers of the kept buffers are never given to cudaFree, not even while the interpreter finalizes, so
they are live at the end of the trace under any CPython version. Each of the 3 steps allocates a 1 MiB
scratch buffer it frees and a 3 MiB buffer it keeps. The checker finds the lines by their markers.
"""
import ctypes

MIB = 1 << 20
STEPS = 3

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]


def device_malloc(nbytes):
    pointer = ctypes.c_void_p()
    err = cudart.cudaMalloc(ctypes.byref(pointer), nbytes)  # marker: cudaMalloc call
    if err != 0:
        raise RuntimeError(f"cudaMalloc({nbytes}) failed with {err}")
    return pointer.value


def device_free(pointer):
    err = cudart.cudaFree(pointer)
    if err != 0:
        raise RuntimeError(f"cudaFree({pointer:#x}) failed with {err}")


kept = []
for _ in range(STEPS):
    scratch = device_malloc(1 * MIB)
    kept.append(device_malloc(3 * MIB))  # marker: leak
    device_free(scratch)
print(f"never freed: {len(kept)} buffers of {3 * MIB} bytes")
