# Run by frames_test.cc; every _mtprobe.probe(label) call records the frames python_frames_read sees.
# frames_test.cc expects the exact line numbers of this file: keep them in sync when editing.
import _mtprobe
import atexit
import threading


def leaf(label):
    _mtprobe.probe(label)
    return 1


class Model:
    def forward(self, x):
        return leaf("nested") + x


def key_of(x):
    return Model().forward(x)


def numbers():
    yield sorted([1], key=lambda v: key_of(v))


def main():
    gen = numbers()
    return next(gen)


class Worker(threading.Thread):
    def run(self):
        leaf("thread")


def größe(label):
    _mtprobe.probe(label)


class Finalized:
    def __del__(self):
        _mtprobe.probe("finalizing")


main()
worker = Worker()
worker.start()
worker.join()
größe("non-ascii-uncached")
_mtprobe.cache_utf8(größe.__code__.co_qualname)
größe("non-ascii-cached")
_mtprobe.probe("module")
atexit.register(_mtprobe.probe, "atexit")
keep_until_exit = Finalized()


# ---- the walk memo: each thread reuses what its previous walk resolved at the same depth ----
def inner_a(label):
    _mtprobe.probe(label)


def inner_b(label):
    _mtprobe.probe(label)


def pick(inner, label):
    inner(label)


def outer_one(label):
    pick(inner_a, label)


def outer_two(label):
    pick(inner_a, label)


def twice(label):
    _mtprobe.probe(label + "-first")
    _mtprobe.probe(label + "-second")


def memo_cases():
    for label in ("memo-fresh", "memo-same"):
        pick(inner_a, label)
    for inner, label in ((inner_a, "memo-inner-before"), (inner_b, "memo-inner-after")):
        pick(inner, label)
    for outer, label in ((outer_one, "memo-outer-before"), (outer_two, "memo-outer-after")):
        outer(label)
    twice("memo-offset")


# Functions made one after another from one code object with another file name each, each freed before the
# next is made: the next code object and its file name land where the previous ones were (CPython reuses the
# freed blocks of a size first), of the same lengths, and its frame where the previous frame was.
def generated_cases():
    template = compile("def gen(label):\n    _mtprobe.probe(label)\n", "generated.py", "exec").co_consts[0]
    previous = None
    reuses = 0
    for i in range(8):
        code = template.replace(co_filename=f"generated_{i}.py")
        function = type(generated_cases)(code, {"_mtprobe": _mtprobe})
        reuses += (id(code), id(code.co_filename)) == previous
        previous = (id(code), id(code.co_filename))
        function(f"memo-generated-{i}")
        del code, function
    _mtprobe.note("memo-generated-reuses", reuses)


memo_cases()
generated_cases()


# ---- a chain deeper than the read's room (frames_test.cc reads at most 64 frames) ----
def down(levels, label):
    if levels:
        return down(levels - 1, label)
    _mtprobe.probe(label)


down(62, "depth-64")  # <module> and 63 calls of down: 64 frames, all kept
down(63, "depth-65")  # 65 frames: the outermost, <module>, is left out
