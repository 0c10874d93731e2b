// Rewrites a version-1 trace in trace format v2 with the tracer's own Event encoder
// (preload/event_encoder.h), chunk for chunk: what the tracer of today would have written for the same
// run. bench/trace_size uses it (trace_size_reencode.cc) to give the v2 size of the version-1 traces in
// examples/, and tests/preload/trace_v2_test.cc to check that a v2 trace reads back as the same Events.
// Needs the classes generated from proto/memtrace.proto, zstd, and preload/ on the include path.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "event_encoder.h"
#include "memtrace.pb.h"

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
  if (left < 24 || load_le32(p) != 0x184D2A50 || file.compare(8, 8, "MEMTRACE") != 0)
    throw std::runtime_error("not a memtrace trace");
  out.version = load_le32(p + 16);
  while (left > 0) {
    size_t frame = ZSTD_findFrameCompressedSize(p, left);
    if (ZSTD_isError(frame)) throw std::runtime_error("a chunk is cut off or damaged");
    if ((load_le32(p) & 0xFFFFFFF0u) != 0x184D2A50u) {  // not the header (a skippable frame)
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
  std::string out;
  for (uint32_t v : {0x184D2A50u, 16u}) out.append(reinterpret_cast<const char*>(&v), 4);
  out += "MEMTRACE";
  for (uint32_t v : {version, 0u}) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

// One chunk as the tracer writes it (preload/trace_writer.cc): a zstd frame with its content checksum.
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

// Rewrites version-1 chunks in version 2, one chunk at a time, in file order. Records other than Event
// and TraceEnd are copied unchanged.
class Reencoder {
 public:
  // drop_every = N > 0: leaves out every Nth Event, as the tracer does when its buffers are full
  // (MEMTRACE_FULL_BUFFER=drop), to check what a reader derives after a gap.
  explicit Reencoder(uint64_t drop_every = 0) : drop_every_(drop_every) {}

  // The version-2 records of one version-1 chunk. Throws std::runtime_error for a record that does not
  // parse or a record length past the chunk's end.
  std::string chunk(const std::string& records) {
    encoder_.start_chunk();
    std::string out;
    proto::Record record;
    for (size_t i = 0; i < records.size();) {
      uint64_t length = read_varint(records, &i);
      if (length > records.size() - i) throw std::runtime_error("a record runs past its chunk");
      if (!record.ParseFromArray(records.data() + i, int(length))) throw std::runtime_error("a record does not parse");
      if (record.has_event()) {
        time_ns_ += uint64_t(record.event().time_delta_ns());
        if (drop_every_ && ++events_ % drop_every_ == 0) {
          encoder_.event_lost();
        } else {
          append_event(record.event(), &out);
        }
      } else if (record.has_end()) {
        time_ns_ += uint64_t(record.end().time_delta_ns());
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
  // Record.`kind` = the encoded message `inner`, length-delimited, as preload/recorder.cc appends it.
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
  void append_end(const proto::TraceEnd& end, std::string* out) {  // as preload/recorder.cc's append_end_locked
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
  uint64_t time_ns_ = 0;  // CLOCK_MONOTONIC of the last Event or TraceEnd read: version-1 deltas summed
  uint64_t drop_every_;
  uint64_t events_ = 0;
};

}  // namespace memtrace::reencode
