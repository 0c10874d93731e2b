// gen_trace: writes a synthetic trace whose live set does not depend on its length, to show that the
// analyzer's memory follows live allocations and distinct stacks, not events.
//
//   gen_trace OUT.mtrace --live N --churn E [--stacks S] [--window W]
//
// The trace (one device, driver-level allocations, 1 us between events):
//   - S distinct call stacks (one Python frame each);
//   - N allocations of 4 KiB made first and never freed: the fixed live set;
//   - then E churn events: alloc/free pairs, each allocation freed W pairs later (so at most W more are
//     live at once), over the S stacks in turn;
//   - a TraceEnd. Records go in chunks of 64 Ki records, each an independent zstd frame with checksum,
//     behind the version-1 header, as the tracer writes them.
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "memtrace.pb.h"

namespace {

using memtrace::proto::Record;

class TraceFile {
 public:
  explicit TraceFile(const char* path) : out_(std::fopen(path, "wb")) {
    if (!out_) {
      std::perror(path);
      std::exit(2);
    }
    cctx_ = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
    // Header frame: skippable magic 0x184D2A50, payload size 16, "MEMTRACE", version 1, reserved 0.
    const unsigned char header[24] = {0x50, 0x2A, 0x4D, 0x18, 16, 0, 0, 0, 'M', 'E', 'M', 'T',
                                      'R',  'A',  'C',  'E',  1,  0, 0, 0, 0,   0,   0,   0};
    std::fwrite(header, 1, sizeof header, out_);
  }
  ~TraceFile() {
    flush();
    ZSTD_freeCCtx(cctx_);
    std::fclose(out_);
  }

  void add(const Record& record) {
    std::string body = record.SerializeAsString();
    for (uint64_t v = body.size(); ; v >>= 7) {  // varint length prefix
      pending_.push_back(char(v >= 0x80 ? (v & 0x7f) | 0x80 : v));
      if (v < 0x80) break;
    }
    pending_ += body;
    if (++pending_records_ == kRecordsPerChunk) flush();
  }

 private:
  static constexpr uint64_t kRecordsPerChunk = 64 * 1024;

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
  }

  std::FILE* out_;
  ZSTD_CCtx* cctx_;
  std::string pending_;
  uint64_t pending_records_ = 0;
};

Record event(memtrace::proto::EventKind kind, uint64_t address, uint64_t size, uint64_t stack_id) {
  Record r;
  auto* e = r.mutable_event();
  e->set_kind(kind);
  e->set_layer(memtrace::proto::LAYER_DRIVER);
  e->set_api(kind == memtrace::proto::ALLOC ? memtrace::proto::CUDA_MALLOC : memtrace::proto::CUDA_FREE);
  e->set_time_delta_ns(1000);
  e->set_tid(1);
  e->set_device(0);
  e->set_address(address);
  e->set_size(size);
  e->set_stack_id(stack_id);
  return r;
}

uint64_t arg(int argc, char** argv, const char* name, uint64_t fallback) {
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtoull(argv[i + 1], nullptr, 10);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: gen_trace OUT.mtrace --live N --churn E [--stacks S] [--window W]\n");
    return 1;
  }
  const uint64_t live = arg(argc, argv, "--live", 10000);
  const uint64_t churn = arg(argc, argv, "--churn", 1000000);
  const uint64_t stacks = std::max<uint64_t>(1, arg(argc, argv, "--stacks", 1000));
  const uint64_t window = std::max<uint64_t>(1, arg(argc, argv, "--window", 256));
  constexpr uint64_t kLiveBase = 0x7f0000000000, kChurnBase = 0x7e0000000000, kBlock = 4096;

  TraceFile trace(argv[1]);
  Record start;
  start.mutable_start()->set_pid(1);
  start.mutable_start()->add_argv("gen_trace");
  trace.add(start);
  for (uint64_t s = 1; s <= stacks; ++s) {
    Record frame;
    frame.mutable_python_frame()->set_id(s);
    frame.mutable_python_frame()->set_file("bench.py");
    frame.mutable_python_frame()->set_function("step_" + std::to_string(s));
    frame.mutable_python_frame()->set_line(uint32_t(s));
    trace.add(frame);
    Record stack;
    stack.mutable_stack()->set_id(s);
    stack.mutable_stack()->add_frames(1ull << 63 | s);
    trace.add(stack);
  }
  uint64_t events = 0;
  for (uint64_t i = 0; i < live; ++i, ++events)
    trace.add(event(memtrace::proto::ALLOC, kLiveBase + i * kBlock, kBlock, 1 + i % stacks));
  // Pair p allocates slot p % window (after freeing what pair p - window put there).
  for (uint64_t p = 0; events < live + churn; ++p) {
    uint64_t address = kChurnBase + (p % window) * kBlock;
    if (p >= window) {
      trace.add(event(memtrace::proto::FREE, address, 0, 0));
      ++events;
    }
    trace.add(event(memtrace::proto::ALLOC, address, kBlock * (1 + p % 4), 1 + p % stacks));
    ++events;
  }
  Record end;
  end.mutable_end()->set_events(events);
  end.mutable_end()->set_time_delta_ns(1000);
  trace.add(end);
  std::printf("%s: %llu events, %llu live to the end, %llu stacks\n", argv[1], (unsigned long long)events,
              (unsigned long long)live, (unsigned long long)stacks);
  return 0;
}
