// Repair of text fields that are not valid UTF-8. proto3 `string` fields must be UTF-8 and the
// protobuf runtime refuses a whole record otherwise, but the tracer copies bytes it does not control
// (argv, paths, names cut at a length limit mid-character). Rather than lose the record, the reader
// replaces each byte of an invalid sequence with '?', in place: lengths never change, so the
// record's framing stays valid.
#pragma once

#include <cstddef>

namespace memtrace {

// Replaces invalid UTF-8 in [data, data + size) with '?'. Returns the number of bytes replaced.
size_t repair_utf8(char* data, size_t size);

// Repairs the `string` fields of one serialized Record (proto/memtrace.proto) in place. Returns the
// number of bytes replaced; 0 also when the bytes are not a well-formed Record.
size_t repair_record_strings(char* data, size_t size);

}  // namespace memtrace
