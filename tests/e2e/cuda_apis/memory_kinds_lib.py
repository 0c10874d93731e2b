"""Shared by check_memory_kinds*.py: the program's trace read back event by event (dump_events), and an
exact comparison with the sequence a checker expects.

The pool and device samples that other hooks interleave (POOL_RESERVED, DEVICE_USAGE) are left out: their
values are the pool sampler's, checked by its own tests; every other event is compared, in order.
"""

SAMPLES = {"POOL_RESERVED", "DEVICE_USAGE"}
MIB = 1 << 20
KIB = 1 << 10


def values(stdout):
    """{name: int} of the program's "value NAME 0xHEX" lines."""
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "value":
            found[parts[1]] = int(parts[2], 16)
    return found


def events(case, trace):
    return [e for e in case.dump_events(trace) if e["kind"] not in SAMPLES]


def event(kind, api, **fields):
    """An expected event: kind and api, and every other field given; fields not given must hold their
    defaults (DEVICE memory, LAYER_UNKNOWN, device -1, zero addresses, sizes, links, context; no stack)."""
    expected = {"kind": kind, "api": api, "layer": "LAYER_UNKNOWN", "memory": "MEMORY_DEVICE", "device": -1,
                "stream": 0, "address": 0, "size": 0, "graph": 0, "capture_id": 0, "handle": 0, "result": 0,
                "context": 0, "has_stack": False}
    expected.update(fields)
    return expected


def alloc(api, layer="LAYER_DRIVER", **fields):
    return event("ALLOC", api, layer=layer, has_stack=True, **fields)


def free(api, layer="LAYER_DRIVER", **fields):
    return event("FREE", api, layer=layer, **fields)


def compare(case, expected, measured):
    case.check("number of events (samples left out)", len(expected), len(measured))
    for i, (want, got) in enumerate(zip(expected, measured)):
        label = f"event {i} {want['kind']} {want['api']}"
        for key, value in want.items():
            case.check(f"{label} {key}", value, got.get(key))
