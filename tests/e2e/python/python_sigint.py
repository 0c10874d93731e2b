"""A Python job stopped by Ctrl-C: SIGINT arrives, CPython's handler turns it into KeyboardInterrupt, nothing
catches it, and CPython finalizes, sets SIGINT back to SIG_DFL and sends it to itself (Modules/main.c,
exit_sigint), so the process dies by SIGINT without running C atexit handlers.

Events: cudaMalloc of 1 MiB six times (6 events), none freed; then os.kill(os.getpid(), SIGINT).
"""
import ctypes
import os
import signal
import time

cudart = ctypes.CDLL("libcudart.so.13")
kept = []
for _ in range(6):
    p = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
    kept.append(p)
print("sending SIGINT", flush=True)
os.kill(os.getpid(), signal.SIGINT)
time.sleep(30)
print("still alive", flush=True)
