#!/usr/bin/env python3
"""What Event encoding changes save, measured on a real trace (bench/trace_size calls this).

  bench/trace_size_encoding.py FILE.mtrace

Rewrites the trace's Event records and compresses the record stream with `zstd -3` as one frame, as written
and under each change, so that only the encoding differs (the writer's chunking adds the same factor to
all: compare bench/trace_size_zstd's "chunked 3" and "one-frame 3" lines). On a version-1 trace:
  A  time_delta_ns carried in microseconds: the delta between absolute times rounded down to 1 us. The
     nanosecond digits are clock noise that zstd cannot compress (about 10 random bits an event).
  B  allocator_allocated_bytes omitted when it equals the device's previous value plus the size of this
     ALLOC (minus it for a FREE), and allocator_reserved_bytes omitted when unchanged since the device's
     previous TORCH_ALLOCATOR event: the reader carries both forward, so nothing is lost.
  C  address as a zigzag delta from the previous address of the same event kind and layer.
A and B are trace format v2 (proto/memtrace.proto), made in the tracer (preload/record/event_encoder.h; v2 times
are rounded from the trace's start, which compresses the same); C is not made. A version-2 trace is
measured as written only: its records already carry A and B.
Then what each Event field costs after compression: the size with that field dropped from every event,
subtracted from the size as written.
"""
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import trace_file  # noqa: E402  (the trace format's constants, read from proto/trace_format.h)


def read_varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def zigzag(value):
    return value * 2 if value >= 0 else -value * 2 - 1


def unzigzag(value):
    return (value >> 1) ^ -(value & 1)


def records(path):
    proc = subprocess.run(["zstd", "-dc", path], capture_output=True)
    if proc.returncode != 0:
        sys.exit(f"trace_size_encoding: {path}: zstd -dc failed: {proc.stderr.decode().strip()}")
    data, out, i = proc.stdout, [], 0
    while i < len(data):
        length, body = read_varint(data, i)
        out.append(data[body:body + length])
        i = body + length
    return out


def event_fields(record):
    """{field number: (wire type, value)} and the field order of an Event record (Record.event = 5)."""
    _, i = read_varint(record, 0)
    length, i = read_varint(record, i)
    end, fields, order = i + length, {}, []
    while i < end:
        key, i = read_varint(record, i)
        if key & 7 == 0:
            value, i = read_varint(record, i)
        else:
            n, i = read_varint(record, i)
            value, i = record[i:i + n], i + n
        fields[key >> 3] = (key & 7, value)
        order.append(key >> 3)
    return fields, order


EVENT_FIELDS = {1: "kind", 2: "layer", 3: "api", 4: "time_delta_ns", 23: "time_delta_us", 5: "tid", 6: "device", 7: "stream",
                8: "address", 9: "size", 11: "stack_id", 12: "allocator_allocated_bytes",
                13: "allocator_reserved_bytes"}


def rewrite(recs, microseconds, derived_totals, address_delta, drop=None):
    out = bytearray()
    time_ns = last_us = 0
    allocated, reserved, last_address = {}, {}, {}
    for record in recs:
        if record[0] != 5 << 3 | 2:
            out += varint(len(record)) + record
            continue
        f, order = event_fields(record)
        value = lambda n: f.get(n, (0, 0))[1]
        if microseconds and 4 in f:
            time_ns += unzigzag(value(4))
            f[4] = (0, zigzag(time_ns // 1000 - last_us))
            last_us = time_ns // 1000
        if derived_totals and 12 in f:
            device, kind, size = value(6), value(1), value(9)
            expected = allocated.get(device, 0) + (size if kind == 1 else -size if kind == 2 else 0)
            allocated[device] = value(12)
            if value(12) == expected:
                del f[12]
            if 13 in f:
                reserved_bytes = value(13)
                if reserved.get(device) == reserved_bytes:
                    del f[13]
                reserved[device] = reserved_bytes
        if address_delta and 8 in f:
            key = (value(1), value(2))
            address = value(8)
            f[8] = (0, zigzag(address - last_address.get(key, 0)))
            last_address[key] = address
        f.pop(drop, None)
        body = bytearray()
        for n in order:
            if n in f:
                wire, v = f[n]
                body += varint(n << 3 | wire) + (varint(v) if wire == 0 else varint(len(v)) + v)
        event = varint(5 << 3 | 2) + varint(len(body)) + bytes(body)
        out += varint(len(event)) + event
    return bytes(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: trace_size_encoding.py FILE.mtrace")
    recs = records(sys.argv[1])
    events = sum(1 for r in recs if r and r[0] == 5 << 3 | 2)
    if events == 0:
        sys.exit(f"trace_size_encoding: {sys.argv[1]}: no events")
    version = header_version(sys.argv[1])
    changes = (("as written", 0, 0, 0), ("A: time in us", 1, 0, 0), ("B: derivable totals omitted", 0, 1, 0),
               ("C: address delta", 0, 0, 1), ("A+B", 1, 1, 0), ("A+B+C", 1, 1, 1))
    if version != 1:
        changes = ((f"as written (version {version})", 0, 0, 0),)
    print(f"{'encoding':28s} {'record B/event':>15s} {'zstd -3 B/event':>16s}")
    for name, a, b, c in changes:
        stream = rewrite(recs, a, b, c)
        print(f"{name:28s} {len(stream) / events:15.2f} {compressed_size(stream) / events:16.2f}")
    whole = compressed_size(rewrite(recs, 0, 0, 0))
    costs = []
    for number, name in EVENT_FIELDS.items():
        costs.append((whole - compressed_size(rewrite(recs, 0, 0, 0, drop=number)), name))
    print("compressed B/event of each event field: " +
          "  ".join(f"{name}={cost / events:.2f}" for cost, name in sorted(costs, reverse=True)))


def header_version(path):
    """The format version of the trace's header frame, at the offsets proto/trace_format.h gives (read by
    tests/e2e/trace_file.py, which restates none of them)."""
    tag = trace_file.HEADER_TAG
    tag_at = trace_file.FORMAT["kHeaderTagOffset"]
    version_at = trace_file.HEADER_VERSION_OFFSET
    with open(path, "rb") as f:
        header = f.read(trace_file.HEADER_BYTES)
    if len(header) < trace_file.HEADER_BYTES or header[tag_at:tag_at + len(tag)] != tag:
        sys.exit(f"trace_size_encoding: {path}: not a memtrace trace")
    return int.from_bytes(header[version_at:version_at + 4], "little")


def compressed_size(stream):
    return len(subprocess.run(["zstd", "-q", "-3", "-c"], input=stream, capture_output=True, check=True).stdout)


if __name__ == "__main__":
    main()
