#include "event_decoder.h"

#include <cstdint>

namespace memtrace {
namespace {

// Protobuf wire format (protobuf.dev/programming-guides/encoding): a tag is (field << 3 | wire type);
// varints are little-endian base-128, at most 10 bytes.
constexpr unsigned kWireVarint = 0, kWireLengthDelimited = 2;
constexpr unsigned kRecordEventField = 5;  // Record.event (proto/memtrace.proto)
constexpr int kMaxVarintBytes = 10;

// Reads one varint at `*p` (before `end`); false if it runs past `end` or is longer than 10 bytes.
inline bool read_varint(const unsigned char*& p, const unsigned char* end, uint64_t* value) {
  // Every tag of fields 1-15 and most enum values are one byte: the loop below costs 6-7 instructions a
  // byte (callgrind), this test 3.
  if (p < end && *p < 0x80) {
    *value = *p++;
    return true;
  }
  uint64_t v = 0;
  for (int i = 0; i < kMaxVarintBytes && p < end; ++i) {
    unsigned char byte = *p++;
    v |= uint64_t(byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) {
      *value = v;
      return true;
    }
  }
  return false;
}

// The same varint as read_varint, for a caller that may read up to 9 bytes past `p` whatever the
// record's end: no bounds test per byte, and a byte's 7 bits added in (protobuf's unrolled form: adding
// byte << 7i and taking back the continuation bit of the byte before equals OR-ing in byte & 0x7f, the
// bit ranges do not overlap). About 4 instructions a byte against the loop's 7 (callgrind). The caller
// tests that it did not run past the record's end.
inline bool read_varint_unbounded(const unsigned char*& p, uint64_t* value) {
  uint64_t v = p[0];
  if (v < 0x80) {
    *value = v;
    ++p;
    return true;
  }
  for (int i = 1; i < kMaxVarintBytes; ++i) {
    uint64_t byte = p[i];
    v += (byte << (7 * i)) - (uint64_t{0x80} << (7 * (i - 1)));
    if (byte < 0x80) {
      *value = v;
      p += i + 1;
      return true;
    }
  }
  return false;
}

// sint32 / sint64 are zigzag-encoded; a sint32 is read from the low 32 bits, as protobuf does.
inline int64_t zigzag64(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }
inline int32_t zigzag32(uint64_t v) {
  uint32_t u = uint32_t(v);
  return int32_t(u >> 1) ^ -int32_t(u & 1);
}

// Stores field `field` of Event; false for a field number Event does not have.
inline bool set_field(proto::Event& e, uint64_t field, uint64_t v) {
  switch (field) {
    case 1: e.set_kind(static_cast<proto::EventKind>(int32_t(v))); return true;
    case 2: e.set_layer(static_cast<proto::Layer>(int32_t(v))); return true;
    case 3: e.set_api(static_cast<proto::Api>(int32_t(v))); return true;
    case 4: e.set_time_delta_ns(zigzag64(v)); return true;
    case 5: e.set_tid(uint32_t(v)); return true;
    case 6: e.set_device(zigzag32(v)); return true;
    case 7: e.set_stream(v); return true;
    case 8: e.set_address(v); return true;
    case 9: e.set_size(v); return true;
    case 10: e.set_result(zigzag32(v)); return true;
    case 11: e.set_stack_id(v); return true;
    case 12: e.set_allocator_allocated_bytes(v); return true;
    case 13: e.set_allocator_reserved_bytes(v); return true;
    case 14: e.set_device_free_bytes(v); return true;
    case 15: e.set_device_total_bytes(v); return true;
    case 16: e.set_handle(v); return true;
    case 17: e.set_memory(static_cast<proto::Memory>(int32_t(v))); return true;
    case 18: e.set_graph(v); return true;
    case 19: e.set_capture_id(v); return true;
    case 20: e.set_process_used_bytes(v); return true;
    case 21: e.set_other_processes_used_bytes(v); return true;
    case 22: e.set_context(v); return true;
    case 23: e.set_time_delta_us(zigzag64(v)); return true;
    default: return false;
  }
}

// Reads the Event's fields in [p, end), each varint with read_varint.
bool decode_event_fields(const unsigned char* p, const unsigned char* end, proto::Event& e) {
  while (p < end) {
    uint64_t tag = 0, value = 0;
    if (!read_varint(p, end, &tag) || (tag & 7) != kWireVarint) return false;
    if (!read_varint(p, end, &value) || !set_field(e, tag >> 3, value)) return false;
  }
  return true;
}

// The same for fields followed by at least 9 readable bytes. A varint that starts before `end` ends at
// most 9 bytes past it, so one bounds test per field is enough: a tag must end before `end` (a value
// follows it), and the last value exactly at `end`. A field read from past `end` on the way may have
// been stored in `e`; the record is refused all the same.
bool decode_event_fields_unbounded(const unsigned char* p, const unsigned char* end, proto::Event& e) {
  while (p < end) {
    uint64_t tag = 0, value = 0;
    if (!read_varint_unbounded(p, &tag) || p >= end || (tag & 7) != kWireVarint) return false;
    if (!read_varint_unbounded(p, &value) || !set_field(e, tag >> 3, value)) return false;
  }
  return p == end;
}

}  // namespace

bool decode_event_record(const char* data, size_t length, proto::Record& record, size_t readable_after) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const unsigned char* end = p + length;
  uint64_t tag = 0, event_bytes = 0;
  if (!read_varint(p, end, &tag) || tag != (kRecordEventField << 3 | kWireLengthDelimited)) return false;
  if (!read_varint(p, end, &event_bytes) || event_bytes != uint64_t(end - p)) return false;
  proto::Event& e = *record.mutable_event();  // the Record's Event, reused when it already holds one
  e.Clear();
  // A varint is at most 10 bytes: one starting before `end` reads at most 9 bytes past it.
  if (readable_after >= kMaxVarintBytes - 1) return decode_event_fields_unbounded(p, end, e);
  return decode_event_fields(p, end, e);
}

}  // namespace memtrace
