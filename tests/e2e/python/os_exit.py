"""Python's os._exit after CUDA calls, as DataLoader workers and launchers end (no atexit, no finalization).

Events: cudaMalloc 4 MiB, cudaMalloc 8 MiB, cudaFree of the 4 MiB (3 events), then os._exit(6).
"""
import ctypes
import os

cudart = ctypes.CDLL("libcudart.so.13")
a, b = ctypes.c_void_p(), ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(a), ctypes.c_size_t(4 << 20)) == 0
assert cudart.cudaMalloc(ctypes.byref(b), ctypes.c_size_t(8 << 20)) == 0
assert cudart.cudaFree(a) == 0
print("calling os._exit(6)", flush=True)
os._exit(6)
