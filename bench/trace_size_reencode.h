// Rewrites a trace of format version 1, 2 or 3 in the tracer's current format (version 3) with the
// tracer's own Event encoder (preload/record/event_encoder.h), chunk for chunk: what the tracer of today would
// have written for the same run. bench/trace_size uses it (trace_size_reencode.cc) to give the current size
// of the older traces in examples/, and tests/preload/trace_v2_test.cc to check that a re-encoded trace
// reads back as the same Events.
// Needs the classes generated from proto/memtrace.proto, zstd, and preload/ on the include path.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "memtrace.pb.h"
#include "record/event_encoder.h"
#include "trace_format.h"

namespace memtrace::reencode {

// A trace file's header version and the decompressed records of each of its chunks, in file order.
struct Chunks {
  uint32_t version = 0;
  std::vector<std::string> records;
};

inline uint32_t load_le32(const unsigned char* p) { return p[0] | p[1] << 8 | p[2] << 16 | uint32_t{p[3]} << 24; }

// Splits `file` (a whole .mtrace file) into chunks. Throws std::runtime_error for a file that is not a
// complete trace (the tool measures finished files; a cut-off one is the analyzer's business).
inline Chunks split_chunks(const std::string& file) {
  Chunks out;
  const auto* p = reinterpret_cast<const unsigned char*>(file.data());
  size_t left = file.size();
  if (left < kHeaderBytes || load_le32(p) != kHeaderFrameMagic ||
      file.compare(kHeaderTagOffset, sizeof kHeaderTag, kHeaderTag, sizeof kHeaderTag) != 0)
    throw std::runtime_error("not a memtrace trace");
  out.version = load_le32(p + kHeaderVersionOffset);
  while (left > 0) {
    size_t frame = ZSTD_findFrameCompressedSize(p, left);
    if (ZSTD_isError(frame)) throw std::runtime_error("a chunk is cut off or damaged");
    if ((load_le32(p) & kSkippableMagicMask) != kHeaderFrameMagic) {  // not the header (a skippable frame)
      unsigned long long size = ZSTD_getFrameContentSize(p, frame);
      if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
        throw std::runtime_error("a chunk does not give its size");
      std::string records(size, '\0');
      if (ZSTD_isError(ZSTD_decompress(records.data(), size, p, frame)))
        throw std::runtime_error("a chunk does not decompress");
      out.records.push_back(std::move(records));
    }
    p += frame;
    left -= frame;
  }
  return out;
}

// The header frame of a trace of format `version` (proto/memtrace.proto).
inline std::string header_frame(uint32_t version) {
  uint8_t header[kHeaderBytes];
  encode_header_frame(version, header);
  return std::string(reinterpret_cast<const char*>(header), sizeof header);
}

// One chunk as the tracer writes it (preload/record/trace_writer.cc): a zstd frame with its content checksum.
inline std::string compress_chunk(const std::string& records, int level = 3) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string out(ZSTD_compressBound(records.size()), '\0');
  size_t n = ZSTD_compress2(cctx, out.data(), out.size(), records.data(), records.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) throw std::runtime_error(ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

// What a hook would have passed to record_event() for this Event.
inline MemoryEvent memory_event(const proto::Event& e) {
  MemoryEvent m;
  m.kind = static_cast<EventKind>(e.kind());
  m.layer = static_cast<Layer>(e.layer());
  m.api = static_cast<Api>(e.api());
  m.device = e.device();
  m.stream = e.stream();
  m.address = e.address();
  m.size = e.size();
  m.result = e.result();
  m.allocator_allocated_bytes = e.allocator_allocated_bytes();
  m.allocator_reserved_bytes = e.allocator_reserved_bytes();
  m.device_free_bytes = e.device_free_bytes();
  m.device_total_bytes = e.device_total_bytes();
  m.handle = e.handle();
  m.memory = static_cast<Memory>(e.memory());
  m.graph = e.graph();
  m.capture_id = e.capture_id();
  m.has_process_usage = e.has_process_used_bytes();
  m.process_used_bytes = e.process_used_bytes();
  m.other_processes_used_bytes = e.other_processes_used_bytes();
  m.context = e.context();
  return m;
}

// The Events of a trace of format `version` as a version-1 reader would have them: what versions 2 and 3
// leave out filled in by the rules of proto/memtrace.proto (sticky fields from the previous Event, then
// allocator totals from the previous TORCH_ALLOCATOR event of the device), in file order.
class EventFiller {
 public:
  explicit EventFiller(uint32_t version) : version_(version) {}

  // Fills `e`, the next Event of the file, in place. Throws std::runtime_error for a version-2/3
  // TORCH_ALLOCATOR event that leaves a total out with no earlier one of its device.
  void fill(proto::Event& e) {
    if (version_ >= 3) {
      if (!e.has_layer()) e.set_layer(sticky_.layer());
      if (!e.has_api()) e.set_api(sticky_.api());
      if (!e.has_tid()) e.set_tid(sticky_.tid());
      if (!e.has_device()) e.set_device(sticky_.device());
      if (!e.has_stream()) e.set_stream(sticky_.stream());
      sticky_.set_layer(e.layer());
      sticky_.set_api(e.api());
      sticky_.set_tid(e.tid());
      sticky_.set_device(e.device());
      sticky_.set_stream(e.stream());
    }
    if (version_ >= 2 && e.api() == proto::TORCH_ALLOCATOR) {
      auto last = totals_.find(e.device());
      if ((!e.has_allocator_allocated_bytes() || !e.has_allocator_reserved_bytes()) && last == totals_.end())
        throw std::runtime_error("a TORCH_ALLOCATOR event leaves a total out with no earlier one of its device");
      if (!e.has_allocator_allocated_bytes()) {
        uint64_t change = e.kind() == proto::ALLOC ? e.size() : e.kind() == proto::FREE ? 0 - e.size() : 0;
        e.set_allocator_allocated_bytes(last->second.first + change);
      }
      if (!e.has_allocator_reserved_bytes()) e.set_allocator_reserved_bytes(last->second.second);
      totals_[e.device()] = {e.allocator_allocated_bytes(), e.allocator_reserved_bytes()};
    }
  }

 private:
  uint32_t version_;
  proto::Event sticky_;                                      // the previous Event's sticky fields (version 3)
  std::map<int32_t, std::pair<uint64_t, uint64_t>> totals_;  // device -> allocated, reserved
};

// Rewrites chunks of a version 1, 2 or 3 trace in version 3, one chunk at a time, in file order. Records
// other than Event and TraceEnd are copied unchanged.
class Reencoder {
 public:
  // `version`: the input's format version. drop_every = N > 0: leaves out every Nth Event, as the tracer
  // does when its buffers are full (MEMTRACE_FULL_BUFFER=drop), to check what a reader derives after a gap.
  explicit Reencoder(uint64_t drop_every = 0, uint32_t version = 1) : drop_every_(drop_every), filler_(version) {}

  // The version-3 records of one input chunk. Throws std::runtime_error for a record that does not
  // parse, a record length past the chunk's end, or a total left out with nothing to derive it from.
  std::string chunk(const std::string& records) {
    encoder_.start_chunk();
    std::string out;
    proto::Record record;
    for (size_t i = 0; i < records.size();) {
      uint64_t length = read_varint(records, &i);
      if (length > records.size() - i) throw std::runtime_error("a record runs past its chunk");
      if (!record.ParseFromArray(records.data() + i, int(length))) throw std::runtime_error("a record does not parse");
      if (record.has_event()) {
        proto::Event* e = record.mutable_event();
        time_ns_ += uint64_t(e->time_delta_ns()) + 1000 * uint64_t(e->time_delta_us());
        filler_.fill(*e);
        if (drop_every_ && ++events_ % drop_every_ == 0) {
          encoder_.event_lost();
        } else {
          append_event(record.event(), &out);
        }
      } else if (record.has_end()) {
        time_ns_ += uint64_t(record.end().time_delta_ns()) + 1000 * uint64_t(record.end().time_delta_us());
        append_end(record.end(), &out);
      } else {
        if (record.has_start()) {
          time_ns_ = record.start().start_monotonic_ns();
          encoder_.begin(time_ns_);
        }
        append_varint(length, &out);
        out.append(records, i, length);
      }
      i += length;
    }
    return out;
  }

 private:
  static uint64_t read_varint(const std::string& s, size_t* i) {
    uint64_t v = 0;
    for (int shift = 0; *i < s.size() && shift < 64; shift += 7) {
      uint8_t b = static_cast<uint8_t>(s[(*i)++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) return v;
    }
    throw std::runtime_error("a record length is cut off");
  }
  static void append_varint(uint64_t v, std::string* out) {
    for (; v >= 0x80; v >>= 7) out->push_back(char(v | 0x80));
    out->push_back(char(v));
  }
  // Record.`kind` = the encoded message `inner`, length-delimited, as preload/record/recorder_state.h appends it.
  static void append_record(uint32_t kind, const ProtoWriter& inner, std::string* out) {
    uint8_t buf[512];
    ProtoWriter record(buf, buf + sizeof buf);
    record.message(kind, inner);
    if (!record.ok()) throw std::runtime_error("a record is too long to re-encode");
    append_varint(record.size(), out);
    out->append(reinterpret_cast<const char*>(buf), record.size());
  }
  void append_event(const proto::Event& e, std::string* out) {
    uint8_t buf[EventEncoder::kMaxEventBytes];
    ProtoWriter w(buf, buf + sizeof buf);
    EventEncoder::Pending p = encoder_.encode_event(memory_event(e), time_ns_, e.tid(), e.stack_id(), w);
    append_record(field::kEvent, w, out);
    encoder_.commit(p);
  }
  // As preload/record/trace_records.cc's append_end_locked.
  void append_end(const proto::TraceEnd& end, std::string* out) {
    uint8_t buf[64];
    ProtoWriter w(buf, buf + sizeof buf);
    w.uint(1, end.events());
    w.uint(2, end.dropped_events());
    w.sint(6, encoder_.end_time_delta_us(time_ns_));
    w.uint(4, uint64_t(end.how()));
    w.uint(5, uint64_t(end.signal()));
    append_record(field::kEnd, w, out);
  }

  EventEncoder encoder_;
  uint64_t time_ns_ = 0;  // CLOCK_MONOTONIC of the last Event or TraceEnd read: the input's deltas summed
  uint64_t drop_every_;
  uint64_t events_ = 0;
  EventFiller filler_;
};

}  // namespace memtrace::reencode
