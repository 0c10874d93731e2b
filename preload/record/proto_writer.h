// Hand-written protobuf encoder for the tracer's hot path: writes the wire format of proto/memtrace.proto
// into a caller-provided byte range and never allocates.
//
// Why not the generated classes: building a message object allocates (repeated fields, strings), and linking
// a protobuf runtime into a library preloaded into someone else's process risks clashing with their own
// copy (two descriptor pools registering the same file). The analyzer parses what this writes with the
// generated lite classes, and tests/preload/proto_writer_test.cc checks the two agree field by field.
//
// Field numbers are spelled out at the call sites (preload/record/recorder.cc, trace_records.cc) next to the .proto
// names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace memtrace {

// The varint fields of both writers below, on `Derived::raw_varint(v)` (one varint): a CRTP base, so that each
// writer's calls inline into straight-line code.
template <typename Derived>
class VarintFields {
 public:
  // proto3 omits fields equal to their default; so do we (the reader cannot tell the difference).
  void uint(uint32_t field, uint64_t v) {
    if (v == 0) return;
    tag_and_value(field, v);
  }
  // A proto3 `optional` field: written even when zero, so that the reader sees it present.
  void optional_uint(uint32_t field, bool present, uint64_t v) {
    if (!present) return;
    tag_and_value(field, v);
  }
  void sint(uint32_t field, int64_t v) { uint(field, zigzag(v)); }  // sint32/sint64
  // A proto3 `optional` sint32/sint64 field: written even when zero, as optional_uint.
  void optional_sint(uint32_t field, bool present, int64_t v) { optional_uint(field, present, zigzag(v)); }

  // sint's encoding: 0, -1, 1, -2 ... as 0, 1, 2, 3 ... (an int32 sign-extended gives sint32's encoding).
  static uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }

 private:
  void tag_and_value(uint32_t field, uint64_t v) {
    Derived& self = static_cast<Derived&>(*this);
    self.raw_varint(uint64_t{field} << 3 | 0);
    self.raw_varint(v);
  }
};

// Appends protobuf fields to [cur, end). On overflow nothing more is written and ok() turns false; the
// caller then discards the whole record.
class ProtoWriter : public VarintFields<ProtoWriter> {
 public:
  ProtoWriter(uint8_t* begin, uint8_t* end) : begin_(begin), cur_(begin), end_(end) {}

  bool ok() const { return ok_; }
  size_t size() const { return static_cast<size_t>(cur_ - begin_); }
  uint8_t* data() const { return begin_; }

  // Where the next byte goes when at least `n` bytes are left, else nullptr; a caller that writes there
  // hands the end of what it wrote to advance_to().
  uint8_t* room_for(size_t n) const { return ok_ && static_cast<size_t>(end_ - cur_) >= n ? cur_ : nullptr; }
  void advance_to(uint8_t* p) { cur_ = p; }

  void raw_varint(uint64_t v) {
    if (!ok_ || static_cast<size_t>(end_ - cur_) < varint_size(v)) {
      ok_ = false;
      return;
    }
    while (v >= 0x80) {
      *cur_++ = static_cast<uint8_t>(v) | 0x80;
      v >>= 7;
    }
    *cur_++ = static_cast<uint8_t>(v);
  }
  void raw_bytes(const void* p, size_t n) {
    if (!ok_ || static_cast<size_t>(end_ - cur_) < n) {
      ok_ = false;
      return;
    }
    if (n) std::memcpy(cur_, p, n);
    cur_ += n;
  }

  void bytes(uint32_t field, const void* p, size_t n) {
    if (n == 0) return;
    raw_varint(uint64_t{field} << 3 | 2);
    raw_varint(n);
    raw_bytes(p, n);
  }
  void string(uint32_t field, const char* s) { bytes(field, s, s ? std::strlen(s) : 0); }
  void packed_uints(uint32_t field, const uint64_t* v, size_t n) {
    if (n == 0) return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += varint_size(v[i]);
    raw_varint(uint64_t{field} << 3 | 2);
    raw_varint(len);
    for (size_t i = 0; i < n && ok_; i++) raw_varint(v[i]);
  }
  // Writes `inner` (an already encoded message) as a length-delimited field.
  void message(uint32_t field, const ProtoWriter& inner) { bytes_always(field, inner.data(), inner.size()); }

  static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      n++;
    }
    return n;
  }

 private:
  void bytes_always(uint32_t field, const void* p, size_t n) {
    raw_varint(uint64_t{field} << 3 | 2);
    raw_varint(n);
    raw_bytes(p, n);
  }

  uint8_t* begin_;
  uint8_t* cur_;
  uint8_t* end_;
  bool ok_ = true;
};

// The same fields as ProtoWriter's, into a range the caller has made large enough for everything it
// writes (a tag and a value of at most kMaxVarintBytes each per field), with no test per write.
// Why it exists: ProtoWriter's byte stores go through uint8_t*, which may alias its own cursor and flags,
// so the compiler reloads them after every byte; with this writer a PyTorch block event is encoded in
// about half the instructions (bench/hot_path_callgrind, torch-nostack: 774 -> 627 per event in all).
class UncheckedFieldWriter : public VarintFields<UncheckedFieldWriter> {
 public:
  static constexpr size_t kMaxVarintBytes = 10;  // a 64-bit value, 7 bits a byte
  // The most bytes one field can take: a tag of a field number below 2^11 and a varint value.
  static constexpr size_t kMaxFieldBytes = 2 + kMaxVarintBytes;

  explicit UncheckedFieldWriter(uint8_t* out) : cur_(out) {}
  uint8_t* end() const { return cur_; }

 private:
  friend class VarintFields<UncheckedFieldWriter>;
  void raw_varint(uint64_t v) {
    uint8_t* p = cur_;
    while (v >= 0x80) {
      *p++ = static_cast<uint8_t>(v) | 0x80;
      v >>= 7;
    }
    *p++ = static_cast<uint8_t>(v);
    cur_ = p;
  }

  uint8_t* cur_;
};

}  // namespace memtrace
