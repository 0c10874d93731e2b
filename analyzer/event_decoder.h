// A decoder for the one record kind that makes up almost all of a trace: a Record holding only an Event.
// The generic protobuf parser clears the Record (freeing its Event) and allocates a new Event for every
// record, and goes through its table-driven field dispatch; this decoder reads the Event's varint
// fields (all of them are varints: proto/memtrace.proto) straight into the Event the Record already has.
#pragma once

#include <cstddef>

#include "memtrace.pb.h"

namespace memtrace {

// Decodes `data[0, length)` when it is a serialized Record made of exactly one `event` field whose
// fields are all known Event fields with the varint wire type, into `record` (which then holds that
// Event and nothing else, as ParseFromArray would leave it). Returns false, leaving `record` in an
// unspecified state, for anything else: another record kind, an unknown field, another wire type, a
// repeated `event` field, a malformed varint or length. The caller parses those with protobuf, which
// gives them its usual meaning (or refuses them). `readable_after` is how many bytes after
// `data + length` may be read (never used as part of the record): with 9 or more, varints are read
// without a bounds test per byte.
bool decode_event_record(const char* data, size_t length, proto::Record& record, size_t readable_after = 0);

}  // namespace memtrace
