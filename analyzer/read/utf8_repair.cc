#include "read/utf8_repair.h"

#include <cstdint>
#include <optional>
#include <set>
#include <utility>

namespace memtrace {
namespace {

// Length of the valid UTF-8 sequence starting at p (at most `left` bytes), or 0 when it is invalid.
// Same rules as the protobuf runtime: no overlong forms, no surrogates, nothing above U+10FFFF.
size_t valid_sequence_length(const unsigned char* p, size_t left) {
  unsigned char b = p[0];
  if (b < 0x80) return 1;
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // range of the second byte
  if (b >= 0xC2 && b <= 0xDF) length = 2;
  else if (b >= 0xE0 && b <= 0xEF) {
    length = 3;
    if (b == 0xE0) low = 0xA0;
    if (b == 0xED) high = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    length = 4;
    if (b == 0xF0) low = 0x90;
    if (b == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (left < length || p[1] < low || p[1] > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return length;
}

std::optional<uint64_t> read_varint(const unsigned char*& p, const unsigned char* end) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    unsigned char b = *p++;
    value |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return value;
  }
  return std::nullopt;
}

// Calls visit(field, begin, end) for each length-delimited field of a message; false when malformed.
template <typename Visit>
bool for_each_length_delimited(unsigned char* begin, unsigned char* end, Visit visit) {
  const unsigned char* p = begin;
  while (p < end) {
    auto key = read_varint(p, end);
    if (!key) return false;
    switch (*key & 7) {
      case 0:
        if (!read_varint(p, end)) return false;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      case 2: {
        auto length = read_varint(p, end);
        if (!length || *length > uint64_t(end - p)) return false;
        unsigned char* field = const_cast<unsigned char*>(p);
        visit(uint32_t(*key >> 3), field, field + *length);
        p += *length;
        break;
      }
      default: return false;
    }
  }
  return true;
}

// The `string` fields of each Record member, by Record field number (see proto/memtrace.proto).
const std::set<uint32_t>* string_fields_of(uint32_t record_field) {
  static const std::set<uint32_t> start{3, 4, 7};      // hostname, argv, tracer_version
  static const std::set<uint32_t> module{1};           // path
  static const std::set<uint32_t> python_frame{2, 3};  // file, function
  static const std::set<uint32_t> thread{2};           // name
  static const std::set<uint32_t> notice{2};           // message
  switch (record_field) {
    case 1: return &start;
    case 2: return &module;
    case 3: return &python_frame;
    case 6: return &thread;
    case 7: return &notice;
    default: return nullptr;
  }
}

}  // namespace

size_t repair_utf8(char* data, size_t size) {
  auto* p = reinterpret_cast<unsigned char*>(data);
  size_t replaced = 0;
  for (size_t i = 0; i < size;) {
    size_t length = valid_sequence_length(p + i, size - i);
    if (length == 0) {
      p[i++] = '?';
      ++replaced;
    } else {
      i += length;
    }
  }
  return replaced;
}

size_t repair_record_strings(char* data, size_t size) {
  auto* begin = reinterpret_cast<unsigned char*>(data);
  size_t replaced = 0;
  for_each_length_delimited(begin, begin + size, [&](uint32_t member, unsigned char* b, unsigned char* e) {
    const std::set<uint32_t>* strings = string_fields_of(member);
    if (!strings) return;
    for_each_length_delimited(b, e, [&](uint32_t field, unsigned char* fb, unsigned char* fe) {
      if (strings->count(field)) replaced += repair_utf8(reinterpret_cast<char*>(fb), size_t(fe - fb));
    });
  });
  return replaced;
}

}  // namespace memtrace
