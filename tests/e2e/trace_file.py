"""Reads a .mtrace file without the analyzer, for the tests of how the tracer writes under faults (a
crash, kill -9, exec, a write error): which records reached the file, and whether its last chunk is whole.

Layout (proto/trace_format.h, proto/memtrace.proto): a zstd skippable frame with the header, then independent
zstd frames of varint-length-delimited Record messages. The framing constants are read from trace_format.h and
the field numbers from memtrace.proto's text, so that this file restates neither. Frames are split here by walking the zstd frame format (RFC 8878:
frame header, 3-byte block headers, optional 4-byte checksum); the complete frames are decompressed
together by the `zstd` command-line tool. A last frame cut short is reported, not decoded.
"""
import pathlib
import re
import struct
import subprocess

PROTO_DIR = pathlib.Path(__file__).resolve().parents[2] / "proto"


def read_format_constants(path=PROTO_DIR / "trace_format.h"):
    """{name: value} of the `inline constexpr` lines of proto/trace_format.h: numbers as ints, the
    character list of kHeaderTag as bytes."""
    constants = {}
    pattern = re.compile(r"^inline constexpr \w+ (k\w+)(?:\[\d*\])? = (.+);", re.M)
    for name, value in pattern.findall(path.read_text()):
        if value.startswith("{"):
            constants[name] = "".join(re.findall(r"'(.)'", value)).encode()
        else:
            constants[name] = int(value.split("//")[0].strip().rstrip("uU"), 0)
    return constants


def read_proto_numbers(path=PROTO_DIR / "memtrace.proto"):
    """{"Message": {field: number}, "Message.Enum": {VALUE: number}} from memtrace.proto's text: the field
    numbers of each message (a oneof's members are its message's) and the values of each enum."""
    numbers = {}
    scopes = []  # (kind, name) of each open block
    block = re.compile(r"^\s*(message|enum|oneof)\s+(\w+)\s*\{")
    field = re.compile(r"^\s*(?:optional\s+|repeated\s+)?[\w.]+\s+(\w+)\s*=\s*(\d+)\s*;")
    value = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*;")
    for line in path.read_text().splitlines():
        line = line.split("//")[0]
        if m := block.match(line):
            scopes.append(m.groups())
            continue
        if line.strip() == "}":
            scopes.pop()
            continue
        names = [name for kind, name in scopes if kind != "oneof"]
        if not scopes:
            continue
        if scopes[-1][0] == "enum" and (m := value.match(line)):
            numbers.setdefault(".".join(names), {})[m.group(1)] = int(m.group(2))
        elif scopes[-1][0] != "enum" and (m := field.match(line)):
            numbers.setdefault(".".join(names), {})[m.group(1)] = int(m.group(2))
    return numbers


FORMAT = read_format_constants()
PROTO = read_proto_numbers()

SKIPPABLE_MAGIC_MASK = FORMAT["kSkippableMagicMask"]
SKIPPABLE_MAGIC = FORMAT["kHeaderFrameMagic"]
ZSTD_MAGIC = FORMAT["kZstdFrameMagic"]
HEADER_TAG = FORMAT["kHeaderTag"]
HEADER_VERSION_OFFSET = FORMAT["kHeaderVersionOffset"]
HEADER_BYTES = FORMAT["kHeaderBytes"]
FIRST_STICKY_FIELDS_VERSION = FORMAT["kFirstStickyFieldsVersion"]

# Field numbers by name, per message (memtrace.proto).
START_FIELDS, EVENT_FIELDS, END_FIELDS = PROTO["TraceStart"], PROTO["Event"], PROTO["TraceEnd"]
NOTICE_FIELDS, THREAD_FIELDS, DEVICE_FIELDS = PROTO["Notice"], PROTO["ThreadInfo"], PROTO["Device"]
MODULE_FIELDS, STACK_FIELDS = PROTO["Module"], PROTO["Stack"]
# Record oneof members.
_RECORD = PROTO["Record"]
START, MODULE, PYTHON_FRAME, STACK, EVENT, THREAD, NOTICE, END = (
    _RECORD[name] for name in ("start", "module", "python_frame", "stack", "event", "thread", "notice", "end"))
DEVICE = _RECORD["device"]
LIVE_AT_ATTACH, ATTACH_BASELINE = _RECORD["live_at_attach"], _RECORD["attach_baseline"]
LIVE_FIELDS, BASELINE_FIELDS = PROTO["LiveAtAttach"], PROTO["AttachBaseline"]
# EventKind
ALLOC, FREE, OOM = (PROTO["EventKind"][name] for name in ("ALLOC", "FREE", "OOM"))
# TraceEnd.How
END_NAMES = {number: name for name, number in PROTO["TraceEnd.How"].items()}
END_EXIT, END_UNDERSCORE_EXIT, END_SIGNAL, END_EXEC = (
    PROTO["TraceEnd.How"][name] for name in ("EXIT", "UNDERSCORE_EXIT", "SIGNAL", "EXEC"))
# Notice.Code
NOTICE_EVENTS_DROPPED, NOTICE_WRITE_FAILED = (
    PROTO["Notice.Code"][name] for name in ("EVENTS_DROPPED", "WRITE_FAILED"))


class TraceFile:
    """records: [(kind, {field: [values]})] in file order; complete: False when the file ends inside a
    frame (or inside its header); frames: number of complete chunk frames."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.raw = f.read()
        self.path = path
        self.complete, self.frames, complete_end = split_frames(self.raw)
        self.records = decode_records(decompress(self.raw[:complete_end])) if complete_end else []

    def of_kind(self, kind):
        return [fields for k, fields in self.records if k == kind]

    def start(self):
        starts = self.of_kind(START)
        return starts[0] if starts else None

    def argv(self):
        start = self.start() or {}
        return [a.decode("utf-8", "replace") for a in start.get(START_FIELDS["argv"], [])]

    def pid(self):
        return first(self.start() or {}, START_FIELDS["pid"])

    def ppid(self):
        return first(self.start() or {}, START_FIELDS["ppid"])

    def version(self):
        """The header's format version (0 when the file is too short to have one)."""
        return struct.unpack_from("<I", self.raw, HEADER_VERSION_OFFSET)[0] if len(self.raw) >= HEADER_BYTES else 0

    def events(self, layers=False):
        """Each Event as a dict of the fields the tests compare (proto3 defaults filled in). From version 3
        on, a sticky field (api, tid, device here; layer too with `layers`) left out has the previous Event's
        value."""
        sticky = self.version() >= FIRST_STICKY_FIELDS_VERSION
        f = EVENT_FIELDS
        previous = {f["api"]: 0, f["tid"]: 0, f["device"]: 0}
        if layers:
            previous[f["layer"]] = 0
        out = []
        for e in self.of_kind(EVENT):
            values = {field: first(e, field, previous[field] if sticky else 0) for field in previous}
            previous = values
            out.append({
                "kind": first(e, f["kind"], 0), "api": values[f["api"]], "tid": values[f["tid"]],
                "device": zigzag(values[f["device"]]), "address": first(e, f["address"], 0),
                "size": first(e, f["size"], 0), "result": zigzag(first(e, f["result"], 0)),
                "stack_id": first(e, f["stack_id"], 0),
            })
            if layers:
                out[-1]["layer"] = values[f["layer"]]
        return out

    def chunk_first_events(self):
        """The first Event record of each complete chunk that has one, as {field: [values]} with only the
        fields the record itself holds (nothing filled in): what a reader that starts at that chunk sees."""
        firsts = []
        for start, end in frame_spans(self.raw):
            if struct.unpack_from("<I", self.raw, start)[0] != ZSTD_MAGIC:
                continue
            events = [fields for kind, fields in decode_records(decompress(self.raw[start:end])) if kind == EVENT]
            if events:
                firsts.append(events[0])
        return firsts

    def ends(self):
        """Each TraceEnd as {"how": name, "signal": n, "events": n, "dropped_events": n}."""
        f = END_FIELDS
        return [{"how": END_NAMES.get(first(e, f["how"], 0), first(e, f["how"], 0)),
                 "signal": first(e, f["signal"], 0),
                 "events": first(e, f["events"], 0), "dropped_events": first(e, f["dropped_events"], 0)}
                for e in self.of_kind(END)]

    def end(self):
        """The TraceEnd, None without one; "several" if the file has more than one."""
        ends = self.ends()
        return ends[0] if len(ends) == 1 else (None if not ends else "several")

    def live_at_attach(self):
        """Each LiveAtAttach as {"layer", "api", "device", "address", "size"} (proto3 defaults filled in)."""
        f = LIVE_FIELDS
        return [{"layer": first(r, f["layer"], 0), "api": first(r, f["api"], 0),
                 "device": zigzag(first(r, f["device"], 0)), "address": first(r, f["address"], 0),
                 "size": first(r, f["size"], 0)} for r in self.of_kind(LIVE_AT_ATTACH)]

    def notices(self, code):
        return [n for n in self.of_kind(NOTICE) if first(n, NOTICE_FIELDS["code"], 0) == code]

    def thread_ids(self):
        return [first(t, THREAD_FIELDS["tid"], 0) for t in self.of_kind(THREAD)]

    def last_record_kind(self):
        return self.records[-1][0] if self.records else None


def first(fields, number, default=None):
    values = fields.get(number)
    return values[0] if values else default


def zigzag(n):
    return (n >> 1) ^ -(n & 1)


def split_frames(data):
    """Returns (ends on a frame boundary, number of chunk frames, offset after the last complete frame)."""
    pos = 0
    frames = 0
    complete_end = 0
    while pos < len(data):
        end = frame_end(data, pos)
        if end is None:
            return False, frames, complete_end
        magic = struct.unpack_from("<I", data, pos)[0]
        if magic == ZSTD_MAGIC:
            frames += 1
        pos = complete_end = end
    return True, frames, complete_end


def frame_spans(data):
    """(start, end) of each complete frame, the header's skippable frame included, in file order."""
    spans = []
    pos = 0
    while pos < len(data):
        end = frame_end(data, pos)
        if end is None:
            break
        spans.append((pos, end))
        pos = end
    return spans


def frame_end(data, pos):
    """Offset just past the zstd frame at `pos`, or None when the data ends inside it."""
    if pos + 8 > len(data):
        return None
    magic = struct.unpack_from("<I", data, pos)[0]
    if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC:
        end = pos + 8 + struct.unpack_from("<I", data, pos + 4)[0]
        return end if end <= len(data) else None
    if magic != ZSTD_MAGIC:
        raise ValueError(f"not a zstd frame at byte {pos} (magic {magic:#x})")
    descriptor = data[pos + 4]
    fcs_flag, single_segment = descriptor >> 6, (descriptor >> 5) & 1
    checksum, dict_flag = (descriptor >> 2) & 1, descriptor & 3
    p = pos + 5
    p += 0 if single_segment else 1  # window descriptor
    p += (0, 1, 2, 4)[dict_flag]
    p += (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    while True:
        if p + 3 > len(data):
            return None
        header = data[p] | data[p + 1] << 8 | data[p + 2] << 16
        last, block_type, size = header & 1, (header >> 1) & 3, header >> 3
        p += 3 + (1 if block_type == 1 else size)
        if p > len(data):
            return None
        if last:
            break
    p += 4 if checksum else 0
    return p if p <= len(data) else None


def decompress(data):
    proc = subprocess.run(["zstd", "-dc", "-q"], input=data, capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise ValueError(f"zstd -dc failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def packed_varints(data):
    """The values of a packed repeated varint field (its bytes as decode_message gives them)."""
    values, pos = [], 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        values.append(value)
    return values


def read_varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def decode_message(data):
    """{field number: [values]}: varints as ints, length-delimited fields as bytes (packed lists too)."""
    fields = {}
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
        elif wire == 2:
            length, pos = read_varint(data, pos)
            value = data[pos:pos + length]
            pos += length
        elif wire == 1:
            value = struct.unpack_from("<Q", data, pos)[0]
            pos += 8
        elif wire == 5:
            value = struct.unpack_from("<I", data, pos)[0]
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def decode_records(data):
    records = []
    pos = 0
    while pos < len(data):
        length, pos = read_varint(data, pos)
        record = decode_message(data[pos:pos + length])
        pos += length
        for kind, values in record.items():  # a oneof: exactly one member
            records.append((kind, decode_message(values[-1])))
    return records
