"""A Python job with faulthandler enabled (installed before the first CUDA call) that crashes in native
code: faulthandler prints the Python traceback and hands the signal back, the process dies by SIGSEGV.

Events: cudaMalloc 4 MiB, cudaMalloc 8 MiB, cudaFree of the 4 MiB (3 events), then a read of address 0.
"""
import ctypes
import faulthandler

faulthandler.enable()
cudart = ctypes.CDLL("libcudart.so.13")
a, b = ctypes.c_void_p(), ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(a), ctypes.c_size_t(4 << 20)) == 0
assert cudart.cudaMalloc(ctypes.byref(b), ctypes.c_size_t(8 << 20)) == 0
assert cudart.cudaFree(a) == 0
print("reading address 0", flush=True)
ctypes.string_at(0)  # the crash: line marked for the checker
print("still alive", flush=True)
