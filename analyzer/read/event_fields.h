// One trace Event as the analyzer reads it: every field of proto::Event (proto/memtrace.proto), in a
// plain struct the reader fills in straight from the file's bytes, with accessors named and typed as
// proto::Event's so that code reads the same against either. A protobuf message costs, per event, a
// Clear() of its has-bits and fields, a setter and a has-bit per field, and a Record around it; this
// struct costs one fixed-size reset and one store per field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "memtrace.pb.h"

namespace memtrace {

// Every Event field is a varint (proto/memtrace.proto), so each is one 64-bit value, kept in
// `values[field number]` (slot 0 unused) in the form its accessor returns: sint32 / sint64 fields
// already zigzag-decoded (as two's complement in the 64 bits), the others as read from the wire
// (narrowed by the accessor, as protobuf narrows a wider varint: an enum or uint32 is the value's low 32
// bits). A field absent from the record is 0, as protobuf's default, except in version 3 a sticky field
// (kStickyFields), which has the previous Event's value. `present[N]` is 1 when field N
// was in the record (or derived, derived_fields.h), else 0: only the `optional` fields' accessors use
// it. A byte per field, not a bit: the decoder marks a field with one store, where a bit took a load
// of 1, a shift and an OR (2 instructions more per field, callgrind).
struct alignas(16) EventFields {
  static constexpr uint32_t kLastField = 23;  // the highest Event field number

  uint64_t values[kLastField + 1];
  uint8_t present[kLastField + 1];

  EventFields() : values{}, present{} {}
  // From an Event the protobuf parser read (a record the reader's decoder leaves to it, or a test's).
  // Implicit so that a proto::Event can be passed wherever an EventFields is taken.
  EventFields(const proto::Event& e);  // NOLINT(google-explicit-constructor)

  // Fields numbered as in proto/memtrace.proto.
  enum Field : uint32_t {
    kKind = 1,
    kLayer = 2,
    kApi = 3,
    kTimeDeltaNs = 4,
    kTid = 5,
    kDevice = 6,
    kStream = 7,
    kAddress = 8,
    kSize = 9,
    kResult = 10,
    kStackId = 11,
    kAllocatorAllocatedBytes = 12,
    kAllocatorReservedBytes = 13,
    kDeviceFreeBytes = 14,
    kDeviceTotalBytes = 15,
    kHandle = 16,
    kMemory = 17,
    kGraph = 18,
    kCaptureId = 19,
    kProcessUsedBytes = 20,
    kOtherProcessesUsedBytes = 21,
    kContext = 22,
    kTimeDeltaUs = 23,
  };
  // The fields read as zigzag-encoded varints (sint32, sint64).
  static constexpr uint32_t kSignedFields = 1u << kTimeDeltaNs | 1u << kDevice | 1u << kResult | 1u << kTimeDeltaUs;
  // Version 3's sticky fields (proto/memtrace.proto): one absent from an Event record has the value it
  // had in the file's previous Event (0 before the first).
  static constexpr uint32_t kStickyFields = 1u << kLayer | 1u << kApi | 1u << kTid | 1u << kDevice | 1u << kStream;

  // Version 3: the same, with each sticky field `e` leaves out taken from `previous` (below).
  EventFields(const proto::Event& e, const EventFields& previous);

  proto::EventKind kind() const { return static_cast<proto::EventKind>(int32_t(values[kKind])); }
  proto::Layer layer() const { return static_cast<proto::Layer>(int32_t(values[kLayer])); }
  proto::Api api() const { return static_cast<proto::Api>(int32_t(values[kApi])); }
  int64_t time_delta_ns() const { return int64_t(values[kTimeDeltaNs]); }
  int64_t time_delta_us() const { return int64_t(values[kTimeDeltaUs]); }
  uint32_t tid() const { return uint32_t(values[kTid]); }
  int32_t device() const { return int32_t(values[kDevice]); }
  uint64_t stream() const { return values[kStream]; }
  uint64_t address() const { return values[kAddress]; }
  uint64_t size() const { return values[kSize]; }
  int32_t result() const { return int32_t(values[kResult]); }
  uint64_t stack_id() const { return values[kStackId]; }
  bool has_allocator_allocated_bytes() const { return has(kAllocatorAllocatedBytes); }
  uint64_t allocator_allocated_bytes() const { return values[kAllocatorAllocatedBytes]; }
  bool has_allocator_reserved_bytes() const { return has(kAllocatorReservedBytes); }
  uint64_t allocator_reserved_bytes() const { return values[kAllocatorReservedBytes]; }
  uint64_t device_free_bytes() const { return values[kDeviceFreeBytes]; }
  uint64_t device_total_bytes() const { return values[kDeviceTotalBytes]; }
  uint64_t handle() const { return values[kHandle]; }
  proto::Memory memory() const { return static_cast<proto::Memory>(int32_t(values[kMemory])); }
  uint64_t graph() const { return values[kGraph]; }
  uint64_t capture_id() const { return values[kCaptureId]; }
  bool has_process_used_bytes() const { return has(kProcessUsedBytes); }
  uint64_t process_used_bytes() const { return values[kProcessUsedBytes]; }
  bool has_other_processes_used_bytes() const { return has(kOtherProcessesUsedBytes); }
  uint64_t other_processes_used_bytes() const { return values[kOtherProcessesUsedBytes]; }
  uint64_t context() const { return values[kContext]; }

  // Every field absent (0), in 14 stores of 16 bytes (SSE2, part of x86-64; other targets split them).
  // Assigning EventFields() copied it 8 bytes at a time and a memset became `rep stos`: 28 and 34
  // instructions per event (callgrind).
  void clear() {
    typedef uint64_t Zero16 __attribute__((vector_size(16), may_alias));
    auto* v = reinterpret_cast<Zero16*>(this);
#pragma GCC unroll 16
    for (size_t i = 0; i < sizeof *this / sizeof(Zero16); ++i) v[i] = Zero16{};
  }

  // The same, except the sticky fields' values (kStickyFields), which stay as they are: a version-3
  // reader's carry, at no cost per field, for a decoder that then stores only the fields a record has
  // (every sticky field absent from it keeps the previous Event's value, decoded: decode_signed_fields
  // decodes only present fields). Their `present` bytes are cleared: they say what the record held.
  // 12 stores instead of clear()'s 14: slots 2-3 and 6-7 are whole 16-byte stores left out, slot 4
  // (time_delta_ns) next to slot 5 (tid) is cleared alone.
  void clear_all_but_sticky() {
    typedef uint64_t Zero16 __attribute__((vector_size(16), may_alias));
    static_assert(kStickyFields == (1u << 2 | 1u << 3 | 1u << 5 | 1u << 6 | 1u << 7) &&
                  offsetof(EventFields, values) == 0);
    auto* v = reinterpret_cast<Zero16*>(this);
    v[0] = Zero16{};  // values[0, 1]
    values[kTimeDeltaNs] = 0;
#pragma GCC unroll 16
    for (size_t i = 4; i < sizeof *this / sizeof(Zero16); ++i) v[i] = Zero16{};  // values[8...], present
  }

  bool has(Field field) const { return present[field] != 0; }
  // Stores a field's value (decoded, as `values` holds it) and marks it present.
  void set(Field field, uint64_t value) {
    values[field] = value;
    present[field] = 1;
  }
};
static_assert(sizeof(EventFields) % 16 == 0 && std::is_trivially_copyable_v<EventFields>);

inline EventFields::EventFields(const proto::Event& e) : EventFields() {
  values[kKind] = uint64_t(int64_t(e.kind()));
  values[kTimeDeltaNs] = uint64_t(e.time_delta_ns());
  // The sticky fields (`optional`) marked present as the decoder marks them: when the record has them.
  if (e.has_layer()) set(kLayer, uint64_t(int64_t(e.layer())));
  if (e.has_api()) set(kApi, uint64_t(int64_t(e.api())));
  if (e.has_tid()) set(kTid, e.tid());
  if (e.has_device()) set(kDevice, uint64_t(int64_t(e.device())));
  if (e.has_stream()) set(kStream, e.stream());
  values[kAddress] = e.address();
  values[kSize] = e.size();
  values[kResult] = uint64_t(int64_t(e.result()));
  values[kStackId] = e.stack_id();
  if (e.has_allocator_allocated_bytes()) set(kAllocatorAllocatedBytes, e.allocator_allocated_bytes());
  if (e.has_allocator_reserved_bytes()) set(kAllocatorReservedBytes, e.allocator_reserved_bytes());
  values[kDeviceFreeBytes] = e.device_free_bytes();
  values[kDeviceTotalBytes] = e.device_total_bytes();
  values[kHandle] = e.handle();
  values[kMemory] = uint64_t(int64_t(e.memory()));
  values[kGraph] = e.graph();
  values[kCaptureId] = e.capture_id();
  if (e.has_process_used_bytes()) set(kProcessUsedBytes, e.process_used_bytes());
  if (e.has_other_processes_used_bytes()) set(kOtherProcessesUsedBytes, e.other_processes_used_bytes());
  values[kContext] = e.context();
  values[kTimeDeltaUs] = uint64_t(e.time_delta_us());
}

// A version-3 Event the protobuf parser read: its fields, and for each sticky field it leaves out
// (explicit presence: proto/memtrace.proto makes them `optional`), the value in `previous`, the file's
// previous Event as filled in (not marked present: `present` says what the record held).
inline EventFields::EventFields(const proto::Event& e, const EventFields& previous) : EventFields(e) {
  for (Field field : {kLayer, kApi, kTid, kDevice, kStream}) {
    if (!present[field]) values[field] = previous.values[field];
  }
}

// The same Event as a protobuf message (for callers that take records as proto::Record): every field
// with its value, the `optional` ones only when present. EventFields(to_proto_event(e)) equals `e` in
// every accessor. A sticky field (`optional`) is written when the record had it or its value is not 0
// (one carried from an earlier Event): the message stands on its own, and the Event of a record that
// protobuf parsed comes back as it was, presence included.
inline proto::Event to_proto_event(const EventFields& e) {
  auto given = [&](EventFields::Field field) { return e.has(field) || e.values[field] != 0; };
  proto::Event out;
  out.set_kind(e.kind());
  if (given(EventFields::kLayer)) out.set_layer(e.layer());
  if (given(EventFields::kApi)) out.set_api(e.api());
  out.set_time_delta_ns(e.time_delta_ns());
  out.set_time_delta_us(e.time_delta_us());
  if (given(EventFields::kTid)) out.set_tid(e.tid());
  if (given(EventFields::kDevice)) out.set_device(e.device());
  if (given(EventFields::kStream)) out.set_stream(e.stream());
  out.set_address(e.address());
  out.set_size(e.size());
  out.set_result(e.result());
  out.set_stack_id(e.stack_id());
  if (e.has_allocator_allocated_bytes()) out.set_allocator_allocated_bytes(e.allocator_allocated_bytes());
  if (e.has_allocator_reserved_bytes()) out.set_allocator_reserved_bytes(e.allocator_reserved_bytes());
  out.set_device_free_bytes(e.device_free_bytes());
  out.set_device_total_bytes(e.device_total_bytes());
  out.set_handle(e.handle());
  out.set_memory(e.memory());
  out.set_graph(e.graph());
  out.set_capture_id(e.capture_id());
  if (e.has_process_used_bytes()) out.set_process_used_bytes(e.process_used_bytes());
  if (e.has_other_processes_used_bytes()) out.set_other_processes_used_bytes(e.other_processes_used_bytes());
  out.set_context(e.context());
  return out;
}

}  // namespace memtrace
