"""Two allocations 40 native frames deep, under Python (tests/e2e/python/deep_alloc.cc through ctypes): one on this
thread, 4 Python frames deep (<module>, main, outer, inner), one on a thread the library starts, which has no
Python frames. Usage: deep_python_stack.py LIBRARY.so [FRAMES]: with FRAMES, first asks
libmemtrace-bench-toggle.so (preloaded) to keep FRAMES native frames on threads with Python frames.
"""
import ctypes
import sys

DEPTH = 40


def inner(library):
    if library.deep_alloc_here(DEPTH) != DEPTH:
        sys.exit("deep_alloc_here did not descend %d levels" % DEPTH)


def outer(library):
    inner(library)


def main():
    library = ctypes.CDLL(sys.argv[1])
    if len(sys.argv) > 2:
        ctypes.CDLL(None).memtrace_bench_set_max_frames_python(int(sys.argv[2]))
    outer(library)
    if library.deep_alloc_on_thread(DEPTH) != DEPTH:
        sys.exit("deep_alloc_on_thread did not descend %d levels" % DEPTH)


main()
