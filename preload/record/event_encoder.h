// The Event and TraceEnd encoding of trace format v3 (proto/memtrace.proto): times in whole microseconds
// since the trace's start, PyTorch's allocator totals left out where the reader can derive them (v2), and
// the sticky fields (layer, api, tid, device, stream) left out where they repeat the previous Event (v3).
// It holds what the next record is encoded against (the previous record's time and sticky fields, each
// device's last written totals) and nothing else, so that tests/preload/event_encoder_test.cc and
// bench/trace_size_reencode drive the very code the tracer runs. Not thread-safe: the recorder calls it under its lock.
//
// Two steps per record, because a record can fail to fit in the chunk buffer (and is then dropped or
// retried): encode_event() writes the fields and says what the record would change, commit() makes it
// so once the record is in the buffer.
#pragma once
#include <cstdint>

#include "record/proto_writer.h"
#include "record/recorder.h"
#include "record/schema.h"

namespace memtrace {

class EventEncoder {
 public:
  // Totals are carried per device ordinal 0 .. kDevices-1; other devices always get both written.
  static constexpr int kDevices = 64;

  // The sticky fields of an Event record (proto/memtrace.proto, version 3), as the reader will hold them.
  struct Sticky {
    Layer layer = Layer::kUnknown;
    Api api = Api::kUnknown;
    uint32_t tid = 0;
    int32_t device = 0;
    uint64_t stream = 0;
  };

  // What encode_event() found; commit() applies it.
  struct Pending {
    uint64_t time_us = 0;          // the record's time: whole microseconds since start
    int device = -1;               // the slot whose totals this record wrote or derived, -1 = none
    uint64_t allocated_bytes = 0;  // the totals after this record (what the reader will hold)
    uint64_t reserved_bytes = 0;
    uint64_t epoch = 0;             // epoch_ when encoded
    bool derive_allocated = false;  // the totals left out: the reader derives them
    bool derive_reserved = false;
    Sticky sticky;  // this record's sticky fields: what the next one is compared with
  };

  // Time zero (TraceStart.start_monotonic_ns); forgets every device's totals.
  void begin(uint64_t start_ns) {
    start_ns_ = start_ns;
    last_us_ = 0;
    epoch_++;
  }

  // The next record starts a new chunk. Totals and sticky fields are written in full again, so that every
  // chunk carries its own starting point (a reader that must skip a damaged chunk picks up again at the
  // next one).
  void start_chunk() { epoch_++; }

  // An event was not recorded (MEMTRACE_FULL_BUFFER=drop with both buffers full). Derivation is always
  // from the totals last written, so the gap cannot make the reader derive a wrong total; writing them in
  // full after it anyway makes the totals after a gap stand on their own, checkable without the chain.
  // The sticky fields are written in full there too (the same points, one rule for both).
  void event_lost() { epoch_++; }

  // Writes the Event fields of `e` into `w` (proto3 defaults left out, sticky fields left out where they
  // repeat the last committed Event's; the time where version 1 had it). `tid` is Event.tid.
  // `t_ns`: CLOCK_MONOTONIC at the event, not before begin()'s start_ns (earlier reads as the start).
  // On overflow `w` turns !ok(), as for any ProtoWriter write.
  Pending encode_event(const MemoryEvent& e, uint64_t t_ns, uint32_t tid, uint64_t stack_id, ProtoWriter& w) const {
    Pending p = pending_for(e, t_ns, tid);
    if (uint8_t* out = w.room_for(kMaxEventBytes)) {  // always, in the tracer: its event buffer has room
      UncheckedFieldWriter fields(out);
      write_fields(e, p, tid, stack_id, fields);
      w.advance_to(fields.end());
    } else {
      write_fields(e, p, tid, stack_id, w);
    }
    return p;
  }

  // At least the most bytes encode_event() writes: 23 field numbers (22 are written) of at most a 2-byte tag
  // and a 10-byte varint each; TheLongestEventFitsKMaxEventBytes checks the longest Event (200 bytes) fits.
  static constexpr size_t kMaxEventBytes = 23 * UncheckedFieldWriter::kMaxFieldBytes;

  // The record encoded as `p` is in the chunk buffer. A chunk that began in between (a fatal-signal
  // handler flushed the buffer while this thread was appending) leaves the device's totals and the sticky
  // fields unknown for the new chunk, so they are written in full again there.
  void commit(const Pending& p) {
    last_us_ = p.time_us;
    if (p.device >= 0) devices_[p.device] = DeviceTotals{p.allocated_bytes, p.reserved_bytes, p.epoch};
    sticky_ = p.sticky;
    sticky_epoch_ = p.epoch;
  }

  // Starts loading the lines that encoding and committing an Event of `device` read and write: the
  // encoder's own fields (one line when the encoder is 64-byte aligned: they come first) and that device's
  // totals. For a caller with other work to do first (the recorder prefetches before it unwinds: after the
  // job's own work between two events these lines are in L3 at best).
  void prefetch(int device) const {
    __builtin_prefetch(this, 1);
    if (device >= 0 && device < kDevices) {
      const char* slot = reinterpret_cast<const char*>(&devices_[device]);
      __builtin_prefetch(slot, 1);
      __builtin_prefetch(slot + sizeof(DeviceTotals) - 1, 1);  // a slot (24 bytes) may straddle two lines
    }
  }

  // TraceEnd.time_delta_us for a TraceEnd at `t_ns`; the next record's delta counts from it.
  int64_t end_time_delta_us(uint64_t t_ns) {
    uint64_t t_us = micros_since_start(t_ns);
    int64_t delta = time_delta_us(t_us);
    last_us_ = t_us;
    return delta;
  }

 private:
  struct DeviceTotals {
    uint64_t allocated_bytes = 0;
    uint64_t reserved_bytes = 0;
    uint64_t epoch = 0;  // valid while equal to epoch_
  };

  // What encoding `e` at `t_ns` would change, and which allocator totals the reader can derive.
  Pending pending_for(const MemoryEvent& e, uint64_t t_ns, uint32_t tid) const {
    Pending p;
    p.time_us = micros_since_start(t_ns);
    p.epoch = epoch_;
    p.sticky = Sticky{e.layer, e.api, tid, e.device, e.stream};
    if (e.api == Api::kTorchAllocator && e.device >= 0 && e.device < kDevices) {
      p.device = e.device;
      const DeviceTotals& last = devices_[e.device];
      if (last.epoch == epoch_) {
        // Unsigned arithmetic, as the reader does it: a wrap here wraps there alike.
        p.derive_allocated = e.allocator_allocated_bytes == last.allocated_bytes + allocated_change(e);
        p.derive_reserved = e.allocator_reserved_bytes == last.reserved_bytes;
      }
      p.allocated_bytes = e.allocator_allocated_bytes;
      p.reserved_bytes = e.allocator_reserved_bytes;
    }
    return p;
  }

  // The fields in field-number order but for the time, which sits where version 1 had time_delta_ns (4).
  // A sticky field is written when it differs from the last committed Event's, zero included, and always
  // on the first Event of an epoch (a chunk, or after a lost event).
  // `Writer`: ProtoWriter or UncheckedFieldWriter (the same calls).
  template <typename Writer>
  void write_fields(const MemoryEvent& e, const Pending& p, uint32_t tid, uint64_t stack_id, Writer& w) const {
    bool torch = e.api == Api::kTorchAllocator;
    bool all = sticky_epoch_ != epoch_;
    w.uint(1, static_cast<uint64_t>(e.kind));
    w.optional_uint(2, all || e.layer != sticky_.layer, static_cast<uint64_t>(e.layer));
    w.optional_uint(3, all || e.api != sticky_.api, static_cast<uint64_t>(e.api));
    w.sint(23, time_delta_us(p.time_us));
    w.optional_uint(5, all || tid != sticky_.tid, tid);
    w.optional_sint(6, all || e.device != sticky_.device, e.device);
    w.optional_uint(7, all || e.stream != sticky_.stream, e.stream);
    w.uint(8, e.address);
    w.uint(9, e.size);
    w.sint(10, e.result);
    w.uint(11, stack_id);
    w.optional_uint(12, torch && !p.derive_allocated, e.allocator_allocated_bytes);
    w.optional_uint(13, torch && !p.derive_reserved, e.allocator_reserved_bytes);
    w.uint(14, e.device_free_bytes);
    w.uint(15, e.device_total_bytes);
    w.uint(16, e.handle);
    w.uint(17, static_cast<uint64_t>(e.memory));
    w.uint(18, e.graph);
    w.uint(19, e.capture_id);
    w.optional_uint(20, e.has_process_usage, e.process_used_bytes);
    w.optional_uint(21, e.has_process_usage, e.other_processes_used_bytes);
    w.uint(22, e.context);
  }

  // What this event does to PyTorch's allocated total (proto: ALLOC adds its size, FREE takes it away).
  static uint64_t allocated_change(const MemoryEvent& e) {
    if (e.kind == EventKind::kAlloc) return e.size;
    if (e.kind == EventKind::kFree) return uint64_t{0} - e.size;
    return 0;
  }

  uint64_t micros_since_start(uint64_t t_ns) const { return t_ns > start_ns_ ? (t_ns - start_ns_) / 1000 : 0; }
  int64_t time_delta_us(uint64_t t_us) const { return static_cast<int64_t>(t_us - last_us_); }

  // Every Event reads or writes all of these: they come first, within the first 64 bytes (see prefetch).
  uint64_t start_ns_ = 0;
  uint64_t last_us_ = 0;
  uint64_t epoch_ = 1;         // only grows: a slot never written (epoch 0) is never derived from
  Sticky sticky_;              // the sticky fields of the last committed Event
  uint64_t sticky_epoch_ = 0;  // sticky_ is what the reader holds while equal to epoch_
  DeviceTotals devices_[kDevices];
};

}  // namespace memtrace
