"""Two allocations (tests/e2e/python/deep_alloc.cc through ctypes) at the bottom of a Python recursion: the first under
128 Python frames (<module> and 127 calls of down()), as many as the tracer keeps, the second under 129, one more.
Usage: deep_python_recursion.py LIBRARY.so
"""
import ctypes
import sys

library = ctypes.CDLL(sys.argv[1])


def down(levels):
    if levels:
        return down(levels - 1)
    if library.deep_alloc_here(1) != 1:
        sys.exit("deep_alloc_here did not descend 1 level")


down(126)  # <module> and 127 calls of down: 128 Python frames
down(127)  # 129
