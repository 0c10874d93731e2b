"""Worker processes the way a DataLoader starts them (multiprocessing, fork or spawn); each worker ends
with os._exit, as multiprocessing's children do.

Usage: python_workers.py fork|spawn
Parent: cudaMalloc 4 MiB; start 2 workers and join them; cudaFree the 4 MiB; exit normally (2 events).
Each worker: cudaMalloc 8 MiB, cudaFree it (2 events).
"""
import ctypes
import multiprocessing
import sys


def cudart():
    return ctypes.CDLL("libcudart.so.13")


def worker():
    lib = cudart()
    p = ctypes.c_void_p()
    assert lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(8 << 20)) == 0
    assert lib.cudaFree(p) == 0


def main():
    context = multiprocessing.get_context(sys.argv[1])
    lib = cudart()
    kept = ctypes.c_void_p()
    assert lib.cudaMalloc(ctypes.byref(kept), ctypes.c_size_t(4 << 20)) == 0
    workers = [context.Process(target=worker) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
        print(f"worker {w.pid} exit code {w.exitcode}", flush=True)
    assert lib.cudaFree(kept) == 0


if __name__ == "__main__":
    main()
