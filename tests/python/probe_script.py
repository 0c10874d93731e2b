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
