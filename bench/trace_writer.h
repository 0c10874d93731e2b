// The bench generators' trace writing (gen_trace.cc, gen_fleet.cc): records into zstd chunks as the tracer
// writes them (proto/trace_format.h, proto/memtrace.proto), and the PyTorch caching-allocator workload
// (blocks inside 2 MiB driver segments, with the allocator's running totals). Header-only; exits with
// status 2 and a line on stderr when the output cannot be written (a generator has nothing to recover).
#pragma once

#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "memtrace.pb.h"
#include "trace_format.h"

namespace memtrace_bench {

using memtrace::proto::Record;

// Writes records in chunks of kRecordsPerChunk records, each an independent zstd frame (level 3, checksum
// on). With a file: the header frame first, each chunk written to the file as it fills. Without one
// (TraceWriter(version)): the chunks only, kept in memory for take_output(), so that a body shared by
// many traces is compressed once and copied into each behind its own header and first chunk.
class TraceWriter {
 public:
  // Creates `path` and writes the header of format `version` (1, 2 or 3).
  TraceWriter(const char* path, uint32_t version) : out_(std::fopen(path, "wb")), version_(version) {
    if (!out_) {
      std::perror(path);
      std::exit(2);
    }
    init();
    uint8_t header[memtrace::kHeaderBytes];  // proto/trace_format.h
    memtrace::encode_header_frame(version, header);
    write(header, sizeof header);
  }
  explicit TraceWriter(uint32_t version) : version_(version) { init(); }
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter() {
    flush();
    ZSTD_freeCCtx(cctx_);
    if (out_ && std::fclose(out_) != 0) fail("close");
  }

  void add(Record record) {
    if (record.has_event()) sticky_fields(*record.mutable_event());
    std::string body = record.SerializeAsString();
    for (uint64_t v = body.size();; v >>= 7) {  // varint length prefix
      pending_.push_back(char(v >= 0x80 ? (v & 0x7f) | 0x80 : v));
      if (v < 0x80) break;
    }
    pending_ += body;
    if (++pending_records_ == kRecordsPerChunk) flush();
  }
  // Ends the chunk being filled (nothing when it is empty).
  void flush() {
    if (pending_.empty()) return;
    std::string frame(ZSTD_compressBound(pending_.size()), '\0');
    size_t n = ZSTD_compress2(cctx_, frame.data(), frame.size(), pending_.data(), pending_.size());
    if (ZSTD_isError(n)) {
      std::fprintf(stderr, "trace_writer: %s\n", ZSTD_getErrorName(n));
      std::exit(2);
    }
    write(frame.data(), n);
    pending_.clear();
    pending_records_ = 0;
    ++chunks_;
  }
  // Appends bytes already framed (whole chunks from another writer's take_output()) to the file.
  void append_chunks(const std::string& chunks) {
    flush();
    write(chunks.data(), chunks.size());
  }
  // The chunks written so far, without a file: taken, the writer starts an empty buffer.
  std::string take_output() {
    flush();
    return std::move(memory_);
  }
  uint32_t version() const { return version_; }
  // The chunk the next record goes into (0, 1, ...).
  uint64_t chunk() const { return chunks_; }

  static constexpr uint64_t kRecordsPerChunk = 64 * 1024;

 private:
  void init() {
    cctx_ = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
  }
  void write(const void* data, size_t n) {
    if (!out_) {
      memory_.append(static_cast<const char*>(data), n);
    } else if (std::fwrite(data, 1, n, out_) != n) {
      fail("write");
    }
  }
  [[noreturn]] static void fail(const char* what) {
    std::perror(what);
    std::exit(2);
  }

  // Version 3: a sticky field (layer, api, tid, device, stream) is written when it differs from the
  // previous Event's, and all five on the first Event of a chunk, as preload/record/event_encoder.h does.
  // Versions 1 and 2: written unless 0, the proto3 default (`optional` fields set to 0 would be written).
  void sticky_fields(memtrace::proto::Event& e) {
    if (version_ < 3) {
      if (e.layer() == 0) e.clear_layer();
      if (e.api() == 0) e.clear_api();
      if (e.tid() == 0) e.clear_tid();
      if (e.device() == 0) e.clear_device();
      if (e.stream() == 0) e.clear_stream();
      return;
    }
    memtrace::proto::Event full;
    full.set_layer(e.layer());
    full.set_api(e.api());
    full.set_tid(e.tid());
    full.set_device(e.device());
    full.set_stream(e.stream());
    if (sticky_chunk_ != chunks_) {  // the chunk's first Event: all five, zeros included
      e.MergeFrom(full);
    } else {
      if (e.layer() == sticky_.layer()) e.clear_layer();
      if (e.api() == sticky_.api()) e.clear_api();
      if (e.tid() == sticky_.tid()) e.clear_tid();
      if (e.device() == sticky_.device()) e.clear_device();
      if (e.stream() == sticky_.stream()) e.clear_stream();
    }
    sticky_ = full;
    sticky_chunk_ = chunks_;
  }

  std::FILE* out_ = nullptr;  // null: the chunks go to memory_
  std::string memory_;
  uint32_t version_;
  uint64_t chunks_ = 0;
  memtrace::proto::Event sticky_;  // the sticky fields of the last Event written (version 3)
  uint64_t sticky_chunk_ = ~0ull;  // the chunk it is in
  ZSTD_CCtx* cctx_ = nullptr;
  std::string pending_;
  uint64_t pending_records_ = 0;
};

// An event of `device` 1 us after the previous one, in the time field of the trace's version: a driver-layer
// cudaMalloc (ALLOC) or cudaFree (FREE) on thread 1, the default stream.
inline Record event(uint32_t version, memtrace::proto::EventKind kind, uint64_t address, uint64_t size,
                    uint64_t stack_id, int32_t device = 0) {
  Record r;
  auto* e = r.mutable_event();
  e->set_kind(kind);
  e->set_layer(memtrace::proto::LAYER_DRIVER);
  e->set_api(kind == memtrace::proto::ALLOC ? memtrace::proto::CUDA_MALLOC : memtrace::proto::CUDA_FREE);
  if (version >= 2) e->set_time_delta_us(1);
  else e->set_time_delta_ns(1000);
  e->set_tid(1);
  e->set_device(device);
  e->set_address(address);
  e->set_size(size);
  e->set_stack_id(stack_id);
  return r;
}

// A PyTorch caching-allocator block event: the allocator's totals are those after the event.
inline Record torch_event(uint32_t version, memtrace::proto::EventKind kind, uint64_t address, uint64_t size,
                          uint64_t stack_id, uint64_t allocated_bytes, uint64_t reserved_bytes, int32_t device = 0) {
  Record r = event(version, kind, address, size, stack_id, device);
  auto* e = r.mutable_event();
  e->set_layer(memtrace::proto::LAYER_BLOCK);
  e->set_api(memtrace::proto::TORCH_ALLOCATOR);
  e->set_allocator_allocated_bytes(allocated_bytes);
  e->set_allocator_reserved_bytes(reserved_bytes);
  return r;
}

// PyTorch's caching allocator on one device: blocks (LAYER_BLOCK, TORCH_ALLOCATOR, with the allocator's
// allocated and reserved totals after each event, as c10::reportMemoryUsageToProfiler reports them) inside
// 2 MiB driver-layer segments (cudaMalloc) made before their first block, as PyTorch's small pool does.
// A block must lie inside one segment.
class TorchWorkload {
 public:
  explicit TorchWorkload(TraceWriter& trace, int32_t device = 0) : trace_(trace), device_(device) {}
  uint64_t events() const { return events_; }
  uint64_t allocated_bytes() const { return allocated_; }
  uint64_t reserved_bytes() const { return reserved_; }

  // A block at `address`, making the segment it lies in first if it is new (segments are aligned).
  void alloc(uint64_t address, uint64_t size, uint64_t stack_id) {
    uint64_t segment = address & ~(kSegment - 1);
    Region& r = region(address);
    if (segment != r.last_segment && segment >= r.next_segment) {
      add(event(trace_.version(), memtrace::proto::ALLOC, segment, kSegment, stack_id, device_));
      reserved_ += kSegment;
      r.next_segment = segment + kSegment;
    }
    r.last_segment = segment;
    allocated_ += size;
    add_torch(
        torch_event(trace_.version(), memtrace::proto::ALLOC, address, size, stack_id, allocated_, reserved_, device_));
  }
  void free(uint64_t address, uint64_t size) {
    allocated_ -= size;
    add_torch(torch_event(trace_.version(), memtrace::proto::FREE, address, size, 0, allocated_, reserved_, device_));
  }
  // The allocator grows by one segment, then empty_cache() gives it back.
  void spare_segment(uint64_t address) {
    add(event(trace_.version(), memtrace::proto::ALLOC, address, kSegment, 1, device_));
    add(event(trace_.version(), memtrace::proto::FREE, address, 0, 0, device_));
  }
  // Segments must be made in increasing address order per region (the addresses of one 2^40-byte
  // range): start a new region at `base`.
  void start_region(uint64_t base) { region(base).next_segment = base; }
  // Any other record of the trace (an event counts in events()).
  void add(const Record& r) {
    if (r.has_event() && next_delta_us_ != 1 && trace_.version() >= 2) {
      Record timed = r;
      timed.mutable_event()->set_time_delta_us(next_delta_us_);
      trace_.add(timed);
    } else {
      trace_.add(r);
    }
    if (r.has_event()) ++events_, next_delta_us_ = 1;
  }
  // The time from the previous event to the next one added (versions 2 and 3; then 1 us again).
  void set_next_delta_us(int64_t us) { next_delta_us_ = us; }

  static constexpr uint64_t kSegment = 2 << 20;

 private:
  struct Region {
    uint64_t next_segment = 0, last_segment = ~0ull;
  };
  Region& region(uint64_t address) {
    return regions_[(address >> 40) & 1];
  }  // the live and churn bases differ in bit 40
  // Version 2 leaves out a total that the previous TORCH_ALLOCATOR event of the same chunk and this
  // event's size give (as preload/record/event_encoder.h does; one device here).
  void add_torch(Record r) {
    auto* e = r.mutable_event();
    if (trace_.version() >= 2 && written_chunk_ == trace_.chunk()) {
      uint64_t change = e->kind() == memtrace::proto::ALLOC ? e->size() : uint64_t{0} - e->size();
      if (e->allocator_allocated_bytes() == written_allocated_ + change) e->clear_allocator_allocated_bytes();
      if (e->allocator_reserved_bytes() == written_reserved_) e->clear_allocator_reserved_bytes();
    }
    written_chunk_ = trace_.chunk();
    written_allocated_ = allocated_;
    written_reserved_ = reserved_;
    add(r);
  }
  TraceWriter& trace_;
  int32_t device_;
  uint64_t written_chunk_ = ~0ull;  // the chunk of the last TORCH_ALLOCATOR event, whose totals follow
  uint64_t written_allocated_ = 0, written_reserved_ = 0;
  uint64_t events_ = 0;
  int64_t next_delta_us_ = 1;
  uint64_t allocated_ = 0, reserved_ = 0;
  Region regions_[2];
};

}  // namespace memtrace_bench
