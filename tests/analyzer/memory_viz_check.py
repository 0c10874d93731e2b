"""Checks a `memtrace export --format memory-viz` snapshot the way PyTorch's readers use it.

    memory_viz_check.py SNAPSHOT.pickle [SNAPSHOT.json]

- `python -m torch.cuda._memory_viz stats`'s assertion: each segment's blocks tile it (sizes add up to total_size,
  addresses consecutive from the segment's address);
- the memory_viz page's Allocator State History (torch/utils/viz/MemoryViz.js, simulate_memory): replaying each
  device's trace backwards from `segments`, every block live at every step lies inside a live segment, each
  segment_map lies inside a live segment, each segment_alloc / segment_free names a segment that exists, each
  free_requested follows a live block (the page throws otherwise);
- the Active Memory Timeline (process_alloc_data): each alloc's block is freed at most once before another alloc at
  its address;
- with a second file: the JSON holds the same snapshot as the pickle (tuples read as lists).
Prints one line `memory_viz_check: ok ...` or `memory_viz_check: FAIL ...` per failure; exit 1 on a failure.
"""
import bisect
import json
import pickle
import sys


def lists(value):
    if isinstance(value, (list, tuple)):
        return [lists(v) for v in value]
    if isinstance(value, dict):
        return {k: lists(v) for k, v in value.items()}
    return value


class Segments:
    """Live segments of one device as the page keeps them: merged on map, split on unmap."""

    def __init__(self):
        self.starts, self.ends, self.streams = [], [], []

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        return i if i >= 0 and addr < self.ends[i] else None

    def insert(self, addr, size, stream, merge):
        i = bisect.bisect_left(self.starts, addr)
        self.starts.insert(i, addr)
        self.ends.insert(i, addr + size)
        self.streams.insert(i, stream)
        if merge:
            if i + 1 < len(self.starts) and self.ends[i] == self.starts[i + 1] and self.streams[i + 1] == stream:
                self.ends[i] = self.ends[i + 1]
                del self.starts[i + 1], self.ends[i + 1], self.streams[i + 1]
            if i > 0 and self.ends[i - 1] == addr and self.streams[i - 1] == stream:
                self.ends[i - 1] = self.ends[i]
                del self.starts[i], self.ends[i], self.streams[i]

    def remove(self, addr, size, merge):
        if not merge:
            i = bisect.bisect_left(self.starts, addr)
            if i == len(self.starts) or self.starts[i] != addr:
                return f"segment_alloc of {addr:#x}: no segment starts there"
            del self.starts[i], self.ends[i], self.streams[i]
            return None
        i = self.find(addr)
        if i is None or addr + size > self.ends[i]:
            return f"segment_map of {addr:#x}+{size}: inside no segment"
        start, end, stream = self.starts[i], self.ends[i], self.streams[i]
        del self.starts[i], self.ends[i], self.streams[i]
        if start < addr:
            self.insert(start, addr - start, stream, False)
        if addr + size < end:
            self.insert(addr + size, end - addr - size, stream, False)
        return None


def check_tiling(snapshot, fail):
    for seg in snapshot["segments"]:
        addr = seg["address"]
        for b in seg["blocks"]:
            if b.get("address", addr) != addr:
                fail(f"segment {seg['address']:#x}: block at {b.get('address'):#x}, expected {addr:#x}")
            addr += b["size"]
        if addr - seg["address"] != seg["total_size"]:
            fail(f"segment {seg['address']:#x}: blocks add up to {addr - seg['address']}, total_size {seg['total_size']}")


def check_device(snapshot, device, fail):
    segments = Segments()
    blocks = {}
    for seg in sorted((s for s in snapshot["segments"] if s["device"] == device), key=lambda s: s["address"]):
        segments.insert(seg["address"], seg["total_size"], seg["stream"], False)
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                blocks[addr] = b["size"]
            addr += b["size"]
    trace = snapshot["device_traces"][device]

    def blocks_inside(where):
        for addr in blocks:
            if segments.find(addr) is None:
                fail(f"device {device} {where}: block {addr:#x} inside no live segment")
                return False
        return True

    if not blocks_inside("at the end"):
        return
    pending_free = set()
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        action = e["action"]
        if action == "free_completed":
            blocks[e["addr"]] = e["size"]
            pending_free.add(e["addr"])
        elif action == "free_requested":
            if e["addr"] not in blocks:
                fail(f"device {device} entry {i}: free_requested of {e['addr']:#x}, no block there")
                return
            pending_free.discard(e["addr"])
        elif action == "alloc":
            blocks.pop(e["addr"], None)
        elif action in ("segment_free", "segment_unmap"):
            segments.insert(e["addr"], e["size"], e["stream"], action == "segment_unmap")
        elif action in ("segment_alloc", "segment_map"):
            error = segments.remove(e["addr"], e["size"], action == "segment_map")
            if error:
                fail(f"device {device} entry {i}: {error}")
                return
        # Checking every block at every step is quadratic: check where segments shrink, and at the start.
        if action in ("segment_alloc", "segment_map") and not blocks_inside(f"before entry {i}"):
            return
    blocks_inside("at the start")
    # The Active Memory Timeline pairs each alloc with the next free_completed at its address.
    live = set()
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            if e["addr"] in live:
                fail(f"device {device} entry {i}: alloc at {e['addr']:#x}, still live")
            live.add(e["addr"])
        elif e["action"] == "free_completed":
            live.discard(e["addr"])


def main():
    failures = []
    fail = failures.append
    with open(sys.argv[1], "rb") as f:
        snapshot = pickle.load(f)
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as f:
            if json.load(f) != lists(snapshot):
                fail("the JSON and the pickle differ")
    check_tiling(snapshot, fail)
    for device in range(len(snapshot["device_traces"])):
        check_device(snapshot, device, fail)
    for line in failures:
        print(f"memory_viz_check: FAIL {line}")
    if not failures:
        entries = sum(len(t) for t in snapshot["device_traces"])
        print(f"memory_viz_check: ok ({len(snapshot['segments'])} segments, {entries} trace entries)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
