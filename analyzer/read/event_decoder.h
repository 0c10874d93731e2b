// A decoder for the one record kind that makes up almost all of a trace: a Record holding only an Event.
// It reads the Event's varint fields (all of them are varints: proto/memtrace.proto) straight into an
// EventFields, with no protobuf message in between: the generic parser clears a Record, allocates an
// Event and goes through its table-driven field dispatch and setters for every record.
// Inline: the reader calls it once per event, and the call alone cost more than a field.
#pragma once

#include <cstddef>
#include <cstdint>

#include "read/event_fields.h"

namespace memtrace {

namespace event_wire {

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

// What read_varint_unbounded adds back after reading bytes 1 to i - 1 with their continuation bit as
// signed bytes: each read as (byte & 0x7f) - 0x80 at bit 7j, so 0x80 << 7j too little.
constexpr uint64_t continuation_bits_of_bytes_before(int i) {
  uint64_t bits = 0;
  for (int j = 1; j < i; ++j) bits += uint64_t{0x80} << (7 * j);
  return bits;
}

// The same varint as read_varint, for a caller that may read up to 9 bytes past `p` whatever the
// record's end: no bounds test per byte, and a byte's 7 bits added in (adding and taking back the
// continuation bits equals OR-ing in byte & 0x7f: the bit ranges do not overlap). About 4-5
// instructions a byte against the loop's 7 (callgrind). The caller tests that it did not run past the
// record's end.
inline bool read_varint_unbounded(const unsigned char*& p, uint64_t* value) {
  uint64_t v = p[0];
  if (v < 0x80) {
    *value = v;
    ++p;
    return true;
  }
  // Unrolled: with constant shifts a byte costs 4-5 instructions, the loop's counter and shift 3 more.
  // Bytes 1-8 are read as signed: one with the continuation bit is negative, and stays negative shifted
  // by up to 56 bits, so the sign of the term added is the test for the last byte, with no copy of the
  // byte to test (1 instruction a byte fewer than testing byte < 0x80: 698 -> 684 per event,
  // callgrind). Each byte j before the last adds (byte & 0x7f) - 0x80 at bit 7j; the 0x80s are given
  // back once, at the last byte. Unsigned sums: they wrap, as the value's bits past 64 are dropped.
  uint64_t sum = v - 0x80;  // byte 0's 7 bits
#pragma GCC unroll 8
  for (int i = 1; i < kMaxVarintBytes - 1; ++i) {
    int64_t term = int64_t(int8_t(p[i])) << (7 * i);
    sum += uint64_t(term);
    if (term >= 0) {
      *value = sum + continuation_bits_of_bytes_before(i);
      p += i + 1;
      return true;
    }
  }
  uint64_t last = p[kMaxVarintBytes - 1];  // bit 63: only the byte's low bit is kept
  if (last >= 0x80) return false;
  *value = sum + continuation_bits_of_bytes_before(kMaxVarintBytes - 1) + (last << 63);
  p += kMaxVarintBytes;
  return true;
}

// Stores the value of an Event field whose tag is `tag` as read (undecoded: see decode_signed_fields);
// false for a tag that is not a varint field Event has. A field given twice keeps its last value, as
// protobuf's parser does with a scalar.
inline bool store_field(EventFields& e, uint64_t tag, uint64_t value) {
  uint64_t field = tag >> 3;
  if ((tag & 7) != kWireVarint || field - 1 >= EventFields::kLastField) return false;
  e.set(EventFields::Field(field), value);
  return true;
}

// sint32 / sint64 are zigzag-encoded; a sint32 is read from the low 32 bits, as protobuf does.
inline uint64_t zigzag64(uint64_t v) { return (v >> 1) ^ (0 - (v & 1)); }
inline uint64_t zigzag32(uint64_t v) {
  uint32_t u = uint32_t(v);
  return uint64_t(int64_t(int32_t((u >> 1) ^ (0u - (u & 1)))));
}
// Decodes the signed fields once all fields are stored, cheaper than a test per field of whether it is
// signed. Only those present: an absent field's 0 would decode to 0, and most events have one or two of
// the four (a version-2 event: time_delta_us, and device unless it is 0).
inline void decode_signed_fields(EventFields& e) {
  if (e.has(EventFields::kTimeDeltaNs))
    e.values[EventFields::kTimeDeltaNs] = zigzag64(e.values[EventFields::kTimeDeltaNs]);
  if (e.has(EventFields::kTimeDeltaUs))
    e.values[EventFields::kTimeDeltaUs] = zigzag64(e.values[EventFields::kTimeDeltaUs]);
  if (e.has(EventFields::kDevice)) e.values[EventFields::kDevice] = zigzag32(e.values[EventFields::kDevice]);
  if (e.has(EventFields::kResult)) e.values[EventFields::kResult] = zigzag32(e.values[EventFields::kResult]);
}
static_assert(EventFields::kSignedFields == (1u << EventFields::kTimeDeltaNs | 1u << EventFields::kTimeDeltaUs |
                                             1u << EventFields::kDevice | 1u << EventFields::kResult));

// Reads the Event's fields in [p, end), each varint with read_varint (event_decoder.cc).
bool decode_event_fields_bounded(const unsigned char* p, const unsigned char* end, EventFields& e);

// The same for fields followed by at least 9 readable bytes. A varint that starts before `end` ends at
// most 9 bytes past it, so one bounds test per field is enough, the loop's: a field is at least two
// bytes (a tag and a value), so one starts only where two bytes are left, and then a one-byte tag ends
// before `end` and its value starts there. (A multi-byte tag tests that it ended before `end`.) The
// last value must end exactly at `end`: one byte left over, or a varint that ran past, is refused at
// the end. A field read from past `end` on the way may have been stored in `e`; the record is refused
// all the same.
// The tag of fields 1-15 is one byte (field << 3 | wire type < 0x80): one test, that its bits 0x80 and
// 0x07 are clear, takes both that and the varint wire type. Its field number may be 0, which protobuf
// refuses: slot 0 takes it and `present[0]` refuses the record at the end, one test per record instead
// of one per field. A one-byte value after a one-byte tag (most of an event's fields) is taken with the
// tag, `p` moved once for both; a longer one is read from the same byte on by read_varint_unbounded,
// as a value after a longer tag is (683.7 -> 672.6 instructions per event with the loop's bound taken
// once, callgrind).
inline bool decode_event_fields_unbounded(const unsigned char* p, const unsigned char* end, EventFields& e) {
  constexpr uint64_t kOneByteVarintTagBits = 0x80 | 7;  // clear: a one-byte tag with wire type 0
  // Clear after the test above failed (so bit 0x80 is set): a first tag byte of fields 16-23, wire
  // type 0. A `test` of these bits alone, not `== 0x80` after an AND, which cost a copy of the tag on
  // every field (606.6 -> 604.6 instructions per event, callgrind).
  constexpr uint64_t kTwoByteVarintTagFirstByteBits = 0x40 | 7;
  // p + 1 < end, with end - 1 taken once (the record's bytes before `end` include the Event's tag).
  const unsigned char* const last_byte = end - 1;
  while (p < last_byte) {
    uint64_t tag = p[0];
    uint64_t value = 0;
    if ((tag & kOneByteVarintTagBits) == 0) {
      value = p[1];
      if (value < 0x80) {
        p += 2;
      } else {
        ++p;  // past the tag
        if (!read_varint_unbounded(p, &value)) return false;
      }
    } else if ((tag & kTwoByteVarintTagFirstByteBits) == 0 && p[1] == 1) {
      // Fields 16-23 with the varint wire type (time_delta_us, 23, on every version-2 event): the tag
      // (field << 3) is 0x80 | (field << 3 & 0x7f) then 0x01, so the first byte alone, 0x80-0xB8, is
      // already field << 3 (0x80 >> 3 = 16). Bit 0x40 set would be fields 24-31, bits 0x07 another wire
      // type: both left to the general path, which refuses them. p[1] is before `end` (the loop's
      // test); a one-byte value at p[2] may be at `end`, readable, and then `p` ends past `end`, refused
      // below. A longer value starts before `end`, as the general path requires.
      value = p[2];
      if (value < 0x80) {
        p += 3;
      } else {
        p += 2;  // past the tag
        if (p >= end || !read_varint_unbounded(p, &value)) return false;
      }
    } else if (tag < 0x80 /* another wire type */ || !read_varint_unbounded(p, &tag) || (tag & 7) != kWireVarint ||
               (tag >> 3) > EventFields::kLastField || p >= end || !read_varint_unbounded(p, &value)) {
      return false;
    }
    e.values[tag >> 3] = value;
    e.present[tag >> 3] = 1;
  }
  return p == end && !e.present[0];
}

}  // namespace event_wire

// One fixed-size reset: every field the previous event had goes back to 0, but for kCarrySticky the
// sticky fields' values.
template <bool kCarrySticky>
inline void clear_for_next_event(EventFields& event) {
  if constexpr (kCarrySticky) {
    event.clear_all_but_sticky();
  } else {
    event.clear();
  }
}

// Decodes `data[0, length)` when it is a serialized Record made of exactly one `event` field whose
// fields are all known Event fields with the varint wire type, into `event` (which then holds that
// Event and nothing else: every field of EventFields(Record.event()) as protobuf's parser would read
// it). Returns false, leaving `event` in an unspecified state, for anything else: another record kind,
// an unknown field, another wire type, a repeated `event` field, a malformed varint or length. The
// caller parses those with protobuf, which gives them its usual meaning (or refuses them).
// `readable_after` is how many bytes after `data + length` may be read (never used as part of the
// record): with 9 or more, varints are read without a bounds test per byte.
// kCarrySticky (trace format version 3): `event` holds the file's previous Event, as filled in, and a
// sticky field (EventFields::kStickyFields) the record leaves out keeps its value there; otherwise
// (versions 1 and 2) it is 0. On a refusal, a sticky field may hold this record's value, undecoded: only
// fields the record has are stored, and a record refused after storing a field is either one protobuf
// parses to the same field present, or one it refuses too (a varint that runs past the record's end).
template <bool kCarrySticky = false>
inline bool decode_event_record(const char* data, size_t length, EventFields& event, size_t readable_after = 0) {
  using namespace event_wire;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const unsigned char* end = p + length;
  constexpr unsigned kEventTag = kRecordEventField << 3 | kWireLengthDelimited;
  if (length >= 2 && length - 2 < 0x80 && p[0] == kEventTag && p[1] == length - 2) {
    p += 2;  // the event's tag and one-byte length (every event the tracer writes): what the loop reads
  } else {
    uint64_t tag = 0, event_bytes = 0;
    if (!read_varint(p, end, &tag) || tag != kEventTag) return false;
    if (!read_varint(p, end, &event_bytes) || event_bytes != uint64_t(end - p)) return false;
  }
  clear_for_next_event<kCarrySticky>(event);
  // A varint is at most 10 bytes: one starting before `end` reads at most 9 bytes past it.
  bool ok = readable_after >= kMaxVarintBytes - 1 ? decode_event_fields_unbounded(p, end, event)
                                                  : decode_event_fields_bounded(p, end, event);
  if (!ok) return false;
  decode_signed_fields(event);
  return true;
}

// decode_event_record for a record of 1 to 127 bytes followed by at least 9 readable bytes (the record
// split loop's, nearly every record): the same answer for an Event written as the tracer writes it, and
// false for anything else, which protobuf's parser then reads, as it reads everything
// decode_event_record refuses. Without the tests those facts make redundant: the record's and the
// Event's lengths (the Event's one-byte length equals length - 2, which for a length below 2 wraps to
// above any byte) and the readable bytes. kCarrySticky as for decode_event_record.
template <bool kCarrySticky = false>
inline bool decode_short_event_record(const char* data, size_t length, EventFields& event) {
  using namespace event_wire;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  constexpr unsigned kEventTag = kRecordEventField << 3 | kWireLengthDelimited;
  if (p[0] != kEventTag || p[1] != length - 2) return false;
  clear_for_next_event<kCarrySticky>(event);
  if (!decode_event_fields_unbounded(p + 2, p + length, event)) return false;
  decode_signed_fields(event);
  return true;
}

}  // namespace memtrace
