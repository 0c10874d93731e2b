"""A Python program that leaks device memory from a known line, through ctypes and the shared runtime.

Each of the 5 steps allocates a 1 MiB scratch buffer it frees and a 4 MiB buffer it keeps in the
module-level list `kept`. Like a torch tensor, a DeviceBuffer frees its memory when it is destroyed,
so the kept buffers are freed while the interpreter finalizes (module globals cleared): memtrace must
still report them as live at exit. The checker finds the lines by their markers.
"""
import ctypes

MIB = 1 << 20
STEPS = 5

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]


class DeviceBuffer:
    def __init__(self, nbytes):
        self.ptr = ctypes.c_void_p()
        err = cudart.cudaMalloc(ctypes.byref(self.ptr), nbytes)  # marker: cudaMalloc call
        if err != 0:
            raise RuntimeError(f"cudaMalloc({nbytes}) failed with {err}")
        self._free = cudart.cudaFree  # kept here: module globals may be gone when __del__ runs

    def __del__(self):
        self._free(self.ptr)


kept = []


def step():
    scratch = DeviceBuffer(1 * MIB)
    kept.append(DeviceBuffer(4 * MIB))  # marker: leak
    del scratch


for _ in range(STEPS):
    step()
print(f"kept {len(kept)} buffers of {4 * MIB} bytes until the interpreter exits")
