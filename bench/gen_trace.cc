// gen_trace: writes a synthetic trace whose live set does not depend on its length, to show that the
// analyzer's memory follows live allocations and distinct stacks, not events.
//
//   gen_trace OUT.mtrace --live N --churn E [--stacks S] [--window W] [--torch] [--spread] [--v1 | --v2]
//
// The trace (one device, 1 us between events):
//   - S distinct call stacks (one Python frame each; with --torch, 8 native frames and 4 Python frames
//     each, drawn from a pool of 256 native return addresses and 64 Python source positions);
//   - N allocations of 4 KiB made first and never freed: the fixed live set (with --spread, made one
//     at a time at even intervals through the churn instead, as a leak grows, so that each of them is
//     a new peak and the last one is the trace's peak);
//   - then churn: alloc/free pairs, each allocation (4 to 16 KiB) freed W pairs later (so at most W more
//     are live at once), over the S stacks in turn, until the trace holds N + E events;
//   - a TraceEnd. Records go in chunks of 64 Ki records, each an independent zstd frame with checksum,
//     behind the header, as the tracer writes them: trace format version 3 (times in whole microseconds,
//     PyTorch's allocator totals left out where the previous TORCH_ALLOCATOR event of the chunk and the
//     event's size give them, layer, api, tid, device and stream left out where they repeat the previous
//     Event of the chunk: proto/memtrace.proto), with --v2 version 2 (all five on every event, proto3
//     defaults left out), or with --v1 version 1 (times in nanoseconds, both totals on every
//     TORCH_ALLOCATOR event). All three read back as the same events.
// Without --torch every allocation is a driver-layer cudaMalloc. With --torch the allocations are
// PyTorch caching-allocator blocks (LAYER_BLOCK, TORCH_ALLOCATOR, with the allocator's allocated and
// reserved totals after each event, as c10::reportMemoryUsageToProfiler reports them), placed inside
// 2 MiB driver-layer segments (cudaMalloc) made before their first block, as PyTorch's small pool does;
// every 4096 pairs a spare segment is made and given back (a cudaMalloc + cudaFree, as when the
// allocator grows and empty_cache() releases it). The events count includes the segment events.
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "memtrace.pb.h"
#include "trace_format.h"

namespace {

using memtrace::proto::Record;

class TraceFile {
 public:
  TraceFile(const char* path, uint32_t version) : out_(std::fopen(path, "wb")), version_(version) {
    if (!out_) {
      std::perror(path);
      std::exit(2);
    }
    cctx_ = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
    uint8_t header[memtrace::kHeaderBytes];  // proto/trace_format.h
    memtrace::encode_header_frame(version, header);
    std::fwrite(header, 1, sizeof header, out_);
  }
  ~TraceFile() {
    flush();
    ZSTD_freeCCtx(cctx_);
    std::fclose(out_);
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
  uint32_t version() const { return version_; }
  // The chunk the next record goes into (0, 1, ...).
  uint64_t chunk() const { return chunks_; }

 private:
  static constexpr uint64_t kRecordsPerChunk = 64 * 1024;

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

  void flush() {
    if (pending_.empty()) return;
    std::string frame(ZSTD_compressBound(pending_.size()), '\0');
    size_t n = ZSTD_compress2(cctx_, frame.data(), frame.size(), pending_.data(), pending_.size());
    if (ZSTD_isError(n)) {
      std::fprintf(stderr, "gen_trace: %s\n", ZSTD_getErrorName(n));
      std::exit(2);
    }
    std::fwrite(frame.data(), 1, n, out_);
    pending_.clear();
    pending_records_ = 0;
    ++chunks_;
  }

  std::FILE* out_;
  uint32_t version_;
  uint64_t chunks_ = 0;
  memtrace::proto::Event sticky_;  // the sticky fields of the last Event written (version 3)
  uint64_t sticky_chunk_ = ~0ull;  // the chunk it is in
  ZSTD_CCtx* cctx_;
  std::string pending_;
  uint64_t pending_records_ = 0;
};

// 1 us after the previous event, in the field of the trace's version.
Record event(uint32_t version, memtrace::proto::EventKind kind, uint64_t address, uint64_t size, uint64_t stack_id) {
  Record r;
  auto* e = r.mutable_event();
  e->set_kind(kind);
  e->set_layer(memtrace::proto::LAYER_DRIVER);
  e->set_api(kind == memtrace::proto::ALLOC ? memtrace::proto::CUDA_MALLOC : memtrace::proto::CUDA_FREE);
  if (version >= 2) e->set_time_delta_us(1);
  else e->set_time_delta_ns(1000);
  e->set_tid(1);
  e->set_device(0);
  e->set_address(address);
  e->set_size(size);
  e->set_stack_id(stack_id);
  return r;
}

// A PyTorch caching-allocator block event: the allocator's totals are those after the event.
Record torch_event(uint32_t version, memtrace::proto::EventKind kind, uint64_t address, uint64_t size,
                   uint64_t stack_id, uint64_t allocated_bytes, uint64_t reserved_bytes) {
  Record r = event(version, kind, address, size, stack_id);
  auto* e = r.mutable_event();
  e->set_layer(memtrace::proto::LAYER_BLOCK);
  e->set_api(memtrace::proto::TORCH_ALLOCATOR);
  e->set_allocator_allocated_bytes(allocated_bytes);
  e->set_allocator_reserved_bytes(reserved_bytes);
  return r;
}

bool flag(int argc, char** argv, const char* name) {
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

uint64_t arg(int argc, char** argv, const char* name, uint64_t fallback) {
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtoull(argv[i + 1], nullptr, 10);
  return fallback;
}

// The --torch workload: blocks inside driver segments, with the allocator's running totals.
class TorchWorkload {
 public:
  explicit TorchWorkload(TraceFile& trace) : trace_(trace) {}
  uint64_t events() const { return events_; }

  // A block at `address`, making the segment it lies in first if it is new (segments are aligned).
  void alloc(uint64_t address, uint64_t size, uint64_t stack_id) {
    uint64_t segment = address & ~(kSegment - 1);
    Region& r = region(address);
    if (segment != r.last_segment && segment >= r.next_segment) {
      add(event(trace_.version(), memtrace::proto::ALLOC, segment, kSegment, stack_id));
      reserved_ += kSegment;
      r.next_segment = segment + kSegment;
    }
    r.last_segment = segment;
    allocated_ += size;
    add_torch(torch_event(trace_.version(), memtrace::proto::ALLOC, address, size, stack_id, allocated_, reserved_));
  }
  void free(uint64_t address, uint64_t size) {
    allocated_ -= size;
    add_torch(torch_event(trace_.version(), memtrace::proto::FREE, address, size, 0, allocated_, reserved_));
  }
  // The allocator grows by one segment, then empty_cache() gives it back.
  void spare_segment(uint64_t address) {
    add(event(trace_.version(), memtrace::proto::ALLOC, address, kSegment, 1));
    add(event(trace_.version(), memtrace::proto::FREE, address, 0, 0));
  }
  // Segments must be made in increasing address order per region (the addresses of one 2^40-byte
  // range): start a new region at `base`.
  void start_region(uint64_t base) { region(base).next_segment = base; }

  static constexpr uint64_t kSegment = 2 << 20;

 private:
  struct Region {
    uint64_t next_segment = 0, last_segment = ~0ull;
  };
  Region& region(uint64_t address) {
    return regions_[(address >> 40) & 1];
  }  // the live and churn bases differ in bit 40
  void add(const Record& r) {
    trace_.add(r);
    ++events_;
  }
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
  TraceFile& trace_;
  uint64_t written_chunk_ = ~0ull;  // the chunk of the last TORCH_ALLOCATOR event, whose totals follow
  uint64_t written_allocated_ = 0, written_reserved_ = 0;
  uint64_t events_ = 0;
  uint64_t allocated_ = 0, reserved_ = 0;
  Region regions_[2];
};

void write_stacks(TraceFile& trace, uint64_t stacks, bool torch) {
  constexpr uint64_t kNativeFrames = 8, kPythonFrames = 4, kNativePool = 256, kPythonPool = 64;
  uint64_t python_positions = torch ? kPythonPool : stacks;
  for (uint64_t s = 1; s <= python_positions; ++s) {
    Record frame;
    frame.mutable_python_frame()->set_id(s);
    frame.mutable_python_frame()->set_file(torch ? "train.py" : "bench.py");
    frame.mutable_python_frame()->set_function("step_" + std::to_string(s));
    frame.mutable_python_frame()->set_line(uint32_t(s));
    trace.add(frame);
  }
  for (uint64_t s = 1; s <= stacks; ++s) {
    Record stack;
    stack.mutable_stack()->set_id(s);
    if (!torch) {
      stack.mutable_stack()->add_frames(1ull << 63 | s);
    } else {
      // Distinct stacks: frame k of stack s is a function of (s, k) that differs between stacks.
      for (uint64_t k = 0; k < kNativeFrames; ++k)
        stack.mutable_stack()->add_frames(0x7f1200000000 + ((s * 7 + k * 13) % kNativePool) * 0x40 + k);
      for (uint64_t k = 0; k < kPythonFrames; ++k)
        stack.mutable_stack()->add_frames(1ull << 63 | (1 + (s + k * 17) % kPythonPool));
      stack.mutable_stack()->add_frames(0x7f1300000000 + s);  // the stack's own call site makes it distinct
    }
    trace.add(stack);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: gen_trace OUT.mtrace --live N --churn E [--stacks S] [--window W] [--torch] [--spread] [--v1 "
                 "| --v2]\n");
    return 1;
  }
  const uint64_t live = arg(argc, argv, "--live", 10000);
  const uint64_t churn = arg(argc, argv, "--churn", 1000000);
  const uint64_t stacks = std::max<uint64_t>(1, arg(argc, argv, "--stacks", 1000));
  const uint64_t window = std::max<uint64_t>(1, arg(argc, argv, "--window", 256));
  const bool torch = flag(argc, argv, "--torch");
  const bool spread = flag(argc, argv, "--spread");
  // With --spread: one live allocation every `interval` churn pairs (a pair is about 2 events).
  const uint64_t interval = std::max<uint64_t>(1, churn / 2 / std::max<uint64_t>(1, live));
  constexpr uint64_t kLiveBase = 0x7f0000000000, kChurnBase = 0x7e0000000000, kSpareBase = 0x7d0000000000;
  constexpr uint64_t kBlock = 4096, kSlot = 4 * kBlock;

  TraceFile trace(argv[1], flag(argc, argv, "--v1") ? 1 : flag(argc, argv, "--v2") ? 2 : 3);
  Record start;
  start.mutable_start()->set_pid(1);
  start.mutable_start()->add_argv("gen_trace");
  trace.add(start);
  write_stacks(trace, stacks, torch);
  uint64_t events = 0;
  if (!torch) {
    uint64_t made = 0;  // live allocations made so far
    for (; !spread && made < live; ++made, ++events)
      trace.add(event(trace.version(), memtrace::proto::ALLOC, kLiveBase + made * kBlock, kBlock, 1 + made % stacks));
    // Pair p allocates slot p % window (after freeing what pair p - window put there).
    for (uint64_t p = 0; events < live + churn; ++p) {
      if (spread && made < live && p % interval == 0) {
        trace.add(event(trace.version(), memtrace::proto::ALLOC, kLiveBase + made * kBlock, kBlock, 1 + made % stacks));
        ++made;
        ++events;
      }
      uint64_t address = kChurnBase + (p % window) * kBlock;
      if (p >= window) {
        trace.add(event(trace.version(), memtrace::proto::FREE, address, 0, 0));
        ++events;
      }
      trace.add(event(trace.version(), memtrace::proto::ALLOC, address, kBlock * (1 + p % 4), 1 + p % stacks));
      ++events;
    }
  } else {
    TorchWorkload w(trace);
    w.start_region(kLiveBase);
    uint64_t made = 0;
    for (; !spread && made < live; ++made) w.alloc(kLiveBase + made * kBlock, kBlock, 1 + made % stacks);
    // As above, with slots of 16 KiB so that every size fits its slot.
    w.start_region(kChurnBase);
    for (uint64_t p = 0; w.events() < live + churn; ++p) {
      if (spread && made < live && p % interval == 0) {
        w.alloc(kLiveBase + made * kBlock, kBlock, 1 + made % stacks);
        ++made;
      }
      uint64_t slot = p % window;
      if (p >= window) w.free(kChurnBase + slot * kSlot, kBlock * (1 + (p - window) % 4));
      w.alloc(kChurnBase + slot * kSlot, kBlock * (1 + p % 4), 1 + p % stacks);
      if (p % 4096 == 4095) w.spare_segment(kSpareBase);
    }
    events = w.events();
  }
  Record end;
  end.mutable_end()->set_events(events);
  if (trace.version() >= 2) end.mutable_end()->set_time_delta_us(1);
  else end.mutable_end()->set_time_delta_ns(1000);
  trace.add(end);
  std::printf("%s: %llu events, %llu live to the end, %llu stacks%s\n", argv[1], (unsigned long long)events,
              (unsigned long long)live, (unsigned long long)stacks, torch ? ", PyTorch blocks in segments" : "");
  return 0;
}
