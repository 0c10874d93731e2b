// Trace format v2 leaves out of the Event records what a reader can work out (proto/memtrace.proto:
// Event.time_delta_us, Event.allocator_allocated_bytes). The reader puts it back before handing a record
// on, so that everything after it sees the Events a version-1 trace of the same run would give: times in
// time_delta_ns, and both allocator totals on every TORCH_ALLOCATOR event.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "memtrace.pb.h"
#include "read/event_fields.h"
#include "trace_format.h"
#include "util/checked_math.h"

namespace memtrace {

class DerivedFields {
 public:
  explicit DerivedFields(uint32_t format_version) : derive_totals_(format_version >= kFirstDerivedTotalsVersion) {}

  // Fills in an Event in place: time_delta_ns becomes time_delta_ns + 1000 * time_delta_us (any
  // version), and in versions 2 and 3 a TORCH_ALLOCATOR event's absent totals are derived from the previous
  // TORCH_ALLOCATOR event of its device (and marked present). Returns false, with `*error` set, for a
  // total left out with no earlier TORCH_ALLOCATOR event of the device to derive it from.
  // kDeriveAllocated false leaves allocator_allocated_bytes as the file has it (absent where left out), for a
  // reader whose consumer never reads it: about 20 instructions per PyTorch event fewer (callgrind). The
  // reserved total, and the error, are as with true. Use one value of it for the whole of a trace.
  template <bool kDeriveAllocated = true>
  bool fill(EventFields& e, std::string* error) {
    if (e.time_delta_us() != 0) add_microseconds(e.time_delta_us(), e);
    return !derive_totals_ || e.api() != proto::TORCH_ALLOCATOR || fill_totals<kDeriveAllocated>(e, error);
  }
  // The same for any other record: a TraceEnd's time_delta_ns as an Event's. (A Record holding an Event
  // is handed on as EventFields, filled by the overload above.)
  void fill(proto::Record& record) {
    if (record.has_end() && record.end().time_delta_us() != 0) {
      proto::TraceEnd& end = *record.mutable_end();
      end.set_time_delta_ns(sum_ns(end.time_delta_ns(), end.time_delta_us()));
    }
  }

 private:
  struct DeviceTotals {
    int64_t device;  // an int32 device ordinal, or kNoDevice
    uint64_t allocated_bytes;
    uint64_t reserved_bytes;
  };
  // No device: outside int32, so no event's device equals it.
  static constexpr int64_t kNoDevice = INT64_MIN;

  // Saturating, not undefined, on a damaged file's absurd values (the memory model counts a delta beyond
  // 100 years as implausible: a wrapped one could look plausible).
  static int64_t sum_ns(int64_t ns, int64_t us) { return saturating_add(ns, saturating_mul(us, int64_t{1000})); }
  static void add_microseconds(int64_t us, EventFields& e) {
    e.values[EventFields::kTimeDeltaNs] = uint64_t(sum_ns(e.time_delta_ns(), us));
  }

  // Inline, and without the error's string building, for the common case of the device of the last
  // TORCH_ALLOCATOR event: the out-of-line version, with its registers saved and restored, cost 26
  // instructions per event more, and a search of `devices_` from the first 4 more (callgrind).
  template <bool kDeriveAllocated>
  bool fill_totals(EventFields& e, std::string* error) {
    if (int64_t{e.device()} != current_.device && !switch_device(e, error)) return false;
    derive_totals<kDeriveAllocated>(e, current_);
    return true;
  }
  // Makes `current_` the totals of `e`'s device: the last of its TORCH_ALLOCATOR events, or, for its
  // first, `e`'s own, which must then give both totals (else false, with `*error` set).
  bool switch_device(const EventFields& e, std::string* error);
  template <bool kDeriveAllocated>
  static void derive_totals(EventFields& e, DeviceTotals& last) {
    if constexpr (kDeriveAllocated) {
      if (!e.has_allocator_allocated_bytes()) {
        // Unsigned arithmetic, as the writer's (preload/record/event_encoder.h).
        uint64_t change = e.kind() == proto::ALLOC ? e.size() : e.kind() == proto::FREE ? uint64_t{0} - e.size() : 0;
        e.set(EventFields::kAllocatorAllocatedBytes, last.allocated_bytes + change);
      }
      last.allocated_bytes = e.allocator_allocated_bytes();
    }
    if (!e.has_allocator_reserved_bytes()) e.set(EventFields::kAllocatorReservedBytes, last.reserved_bytes);
    last.reserved_bytes = e.allocator_reserved_bytes();
  }

  bool derive_totals_;
  // The totals after the last TORCH_ALLOCATOR event, of its device; that device's entry in devices_ is
  // brought up to date only when another device's event comes.
  DeviceTotals current_{kNoDevice, 0, 0};
  // One per device seen (a handful in a real trace, but as many as the events in a hostile one: hence a
  // hash table, not a list searched in order). Looked up only when the device changes.
  std::unordered_map<int64_t, DeviceTotals> devices_;
};

}  // namespace memtrace
