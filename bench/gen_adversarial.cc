// gen_adversarial: writes a valid trace of an adversarial shape, about a given size on disk, for
// bench/adversarial (the analyzer's time and memory per MiB of input on shapes a real job rarely makes
// but a file can hold).
//
//   gen_adversarial SHAPE OUT.mtrace [BYTES]      BYTES: the file's size to reach (default 1 MiB)
//
// Shapes (each a well-formed trace, format version 3 with every sticky field and allocator total written,
// 1 to 1000 us between events at random so that events do not compress to nothing):
//   deep_stack        Stacks of 1,000,000 native frames (drawn from 4 return addresses of one Module: about
//                     300 KiB each on disk, 6 MB of varints), each the stack of one allocation
//                     that is never freed.
//   long_module_path  Modules whose path is 60 KiB long, each with a stack of one frame in it and an
//                     allocation that is never freed.
//   many_devices      Driver allocations on 100,000 distinct device ordinals in turn, never freed.
//   graph_launches    One graph of 1,024 memory nodes (512 allocations, then their 512 frees), instantiated
//                     once, then launched over and over.
//   timeline_blocks   10,000 driver segments of 2 MiB and 50,000 live PyTorch blocks in them, then
//                     PyTorch block allocations and frees, each changing the allocator's totals.
//   modules_descending Modules at descending addresses (each below the previous one), then one stack with a
//                     frame in every 100th of them and an allocation.
//   long_python_names Python frames whose function name is 60 KiB long, each the one frame of a stack with
//                     an allocation that is never freed.
//   many_notices      Notice records with distinct 40-character messages.
//   remap_pages       One address reservation with 2,000 VMM pages (cuMemCreate + cuMemMap, 2 MiB each) mapped
//                     one after another and a PyTorch block in the first (one expandable segment), then
//                     rounds of: unmap the middle page, a block alloc, map it back, the block's free.
//   oom_live          Allocations never freed, on 50,000 stacks of 2 frames taken in turn, up to the size, then
//                     150 failed cudaMalloc calls (each OOM's call sites walk the whole live set).
// Prints "SHAPE: N units, BYTES bytes" (the unit: a stack, a module, an event, a launch, a frame, a notice).
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "memtrace.pb.h"
#include "trace_format.h"

namespace {

namespace proto = memtrace::proto;

constexpr size_t kChunkContentBytes = 256 << 10;  // a chunk is flushed at this much content (or at a larger record)
constexpr uint64_t kModuleStart = 0x7f1234000000;

// Writes the header, then records in chunks (zstd level 3, checksum on), as the tracer does.
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
    uint8_t header[memtrace::kHeaderBytes];  // proto/trace_format.h
    memtrace::encode_header_frame(3, header);
    write(header, sizeof header);
  }
  ~TraceFile() {
    flush();
    ZSTD_freeCCtx(cctx_);
    std::fclose(out_);
  }
  void record(const proto::Record& r) {
    std::string body = r.SerializeAsString();
    uint64_t n = body.size();
    while (n >= 0x80) {
      pending_.push_back(char(n | 0x80));
      n >>= 7;
    }
    pending_.push_back(char(n));
    pending_ += body;
    if (pending_.size() >= kChunkContentBytes) flush();
  }
  void flush() {
    if (pending_.empty()) return;
    std::string frame(ZSTD_compressBound(pending_.size()), '\0');
    size_t n = ZSTD_compress2(cctx_, frame.data(), frame.size(), pending_.data(), pending_.size());
    if (ZSTD_isError(n)) {
      std::fprintf(stderr, "gen_adversarial: %s\n", ZSTD_getErrorName(n));
      std::exit(2);
    }
    write(frame.data(), n);
    pending_.clear();
  }
  // Bytes on disk so far, the chunk being filled counted at a guessed 4:1.
  uint64_t bytes() const { return written_ + pending_.size() / 4; }

 private:
  void write(const void* data, size_t n) {
    if (std::fwrite(data, 1, n, out_) != n) {
      std::perror("gen_adversarial: write");
      std::exit(2);
    }
    written_ += n;
  }
  std::FILE* out_;
  ZSTD_CCtx* cctx_;
  std::string pending_;
  uint64_t written_ = 0;
};

class Generator {
 public:
  Generator(const char* path, uint64_t target_bytes) : file_(path), target_(target_bytes) {
    proto::Record r;
    auto* s = r.mutable_start();
    s->set_pid(4242);
    s->set_start_monotonic_ns(1'000'000'000);
    s->add_argv("adversarial");
    file_.record(r);
  }
  ~Generator() {
    proto::Record r;
    r.mutable_end()->set_events(events_);
    file_.record(r);
  }
  bool full() const { return file_.bytes() >= target_; }
  std::mt19937_64& rng() { return rng_; }

  // An event with every sticky field written; the time since the previous one 1 to 1000 us.
  proto::Event event(proto::EventKind kind, proto::Layer layer, proto::Api api, int32_t device, uint64_t address,
                     uint64_t size, uint64_t stack_id = 0) {
    proto::Event e;
    e.set_kind(kind);
    e.set_layer(layer);
    e.set_api(api);
    e.set_tid(100);
    e.set_device(device);
    e.set_stream(0);
    e.set_address(address);
    e.set_size(size);
    e.set_stack_id(stack_id);
    e.set_time_delta_us(int64_t(1 + rng_() % 1000));
    return e;
  }
  void emit(const proto::Event& e) {
    proto::Record r;
    *r.mutable_event() = e;
    file_.record(r);
    ++events_;
  }
  void emit(const proto::Record& r) { file_.record(r); }
  void module(const std::string& path, uint64_t start, uint64_t end) {
    proto::Record r;
    r.mutable_module()->set_path(path);
    r.mutable_module()->set_load_address(start);
    r.mutable_module()->set_start(start);
    r.mutable_module()->set_end(end);
    emit(r);
  }
  // A stack of `frames` frames, each from `frame(i)`, and a driver allocation with it, never freed.
  void leaked_stack(uint64_t id, size_t frames, const std::function<uint64_t(size_t)>& frame) {
    proto::Record r;
    auto* s = r.mutable_stack();
    s->set_id(id);
    for (size_t i = 0; i < frames; ++i) s->add_frames(frame(i));
    emit(r);
    emit(event(proto::ALLOC, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x10000000 + id * 0x100000, 4096, id));
  }
  std::string random_text(size_t bytes) {
    std::string text(bytes, 'a');
    for (char& c : text) c = char('a' + rng_() % 26);
    return text;
  }

 private:
  TraceFile file_;
  uint64_t target_;
  std::mt19937_64 rng_{42};
  uint64_t events_ = 0;
};

using Shape = uint64_t (*)(Generator&);

uint64_t deep_stack(Generator& g) {
  g.module("/nonexistent/libdeep.so", kModuleStart, kModuleStart + (1 << 20));
  uint64_t stacks = 0;
  do {
    ++stacks;
    g.leaked_stack(stacks, 1'000'000, [&](size_t) { return kModuleStart + 16 * (g.rng()() % 4); });
  } while (!g.full());
  return stacks;
}

uint64_t long_module_path(Generator& g) {
  uint64_t modules = 0;
  do {
    uint64_t start = kModuleStart + modules * 0x100000;
    g.module("/" + g.random_text(60 << 10) + ".so", start, start + 0x10000);
    ++modules;
    g.leaked_stack(modules, 1, [&](size_t) { return start + 0x100; });
  } while (!g.full());
  return modules;
}

uint64_t many_devices(Generator& g) {
  uint64_t events = 0;
  do {
    int32_t device = int32_t(events % 100'000);
    g.emit(g.event(proto::ALLOC, proto::LAYER_DRIVER, proto::CUDA_MALLOC, device, 0x10000000 + events * 0x1000, 4096));
    ++events;
  } while (!g.full());
  return events;
}

uint64_t graph_launches(Generator& g) {
  constexpr uint64_t kGraph = 0x6000, kExec = 0x7000, kNodes = 512;
  for (int alloc = 1; alloc >= 0; --alloc)
    for (uint64_t i = 0; i < kNodes; ++i) {
      proto::Event e = g.event(alloc ? proto::ALLOC : proto::FREE, proto::LAYER_BLOCK,
                               alloc ? proto::CU_GRAPH_ADD_MEM_ALLOC_NODE : proto::CU_GRAPH_ADD_MEM_FREE_NODE, 0,
                               0x20000000 + i * 0x10000, alloc ? 0x10000 : 0);
      e.set_graph(kGraph);
      g.emit(e);
    }
  proto::Event instantiate =
      g.event(proto::GRAPH_INSTANTIATE, proto::LAYER_UNKNOWN, proto::CU_GRAPH_INSTANTIATE, 0, kExec, 0);
  instantiate.set_graph(kGraph);
  g.emit(instantiate);
  uint64_t launches = 0;
  do {
    g.emit(g.event(proto::GRAPH_LAUNCH, proto::LAYER_UNKNOWN, proto::CU_GRAPH_LAUNCH, 0, kExec, 0));
    ++launches;
  } while (!g.full());
  return launches;
}

uint64_t timeline_blocks(Generator& g) {
  constexpr uint64_t kSegments = 10'000, kSegmentBytes = 2 << 20, kBlocksPerSegment = 5, kBlockBytes = 4096;
  constexpr uint64_t kBase = 0x700000000000;
  uint64_t reserved = 0, allocated = 0;
  auto torch = [&](proto::EventKind kind, uint64_t address, uint64_t size) {
    proto::Event e = g.event(kind, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, address, size);
    e.set_allocator_allocated_bytes(allocated);
    e.set_allocator_reserved_bytes(reserved);
    g.emit(e);
  };
  for (uint64_t s = 0; s < kSegments; ++s) {
    g.emit(g.event(proto::ALLOC, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, kBase + s * kSegmentBytes, kSegmentBytes));
    reserved += kSegmentBytes;
    for (uint64_t b = 0; b < kBlocksPerSegment; ++b) {
      allocated += kBlockBytes;
      torch(proto::ALLOC, kBase + s * kSegmentBytes + b * kBlockBytes, kBlockBytes);
    }
  }
  // Churn above the live blocks: each pair allocates a block at a free place of a random segment and frees it.
  uint64_t events = 0;
  do {
    uint64_t address =
        kBase + (g.rng()() % kSegments) * kSegmentBytes + (kBlocksPerSegment + g.rng()() % 500) * kBlockBytes;
    allocated += kBlockBytes;
    torch(proto::ALLOC, address, kBlockBytes);
    allocated -= kBlockBytes;
    torch(proto::FREE, address, kBlockBytes);
    events += 2;
  } while (!g.full());
  return events;
}

uint64_t modules_descending(Generator& g) {
  uint64_t modules = 0;
  do {
    uint64_t start = kModuleStart - modules * 0x100000;
    g.module("/lib/libm" + std::to_string(modules) + ".so", start, start + 0x10000);
    ++modules;
  } while (!g.full());
  g.leaked_stack(1, size_t((modules + 99) / 100), [&](size_t i) { return kModuleStart - i * 100 * 0x100000 + 0x100; });
  return modules;
}

uint64_t long_python_names(Generator& g) {
  constexpr uint64_t kPy = 1ull << 63;
  uint64_t frames = 0;
  do {
    ++frames;
    proto::Record r;
    auto* f = r.mutable_python_frame();
    f->set_id(frames);
    f->set_file("train.py");
    f->set_function(g.random_text(60 << 10));
    f->set_line(uint32_t(frames));
    g.emit(r);
    g.leaked_stack(frames, 1, [&](size_t) { return kPy | frames; });
  } while (!g.full());
  return frames;
}

uint64_t many_notices(Generator& g) {
  uint64_t notices = 0;
  do {
    proto::Record r;
    r.mutable_notice()->set_code(proto::Notice::Code(1 + notices % 5));
    r.mutable_notice()->set_message(g.random_text(40));
    r.mutable_notice()->set_count(notices);
    g.emit(r);
    ++notices;
  } while (!g.full());
  return notices;
}

uint64_t remap_pages(Generator& g) {
  constexpr uint64_t kPages = 2'000, kPageBytes = 2 << 20, kBlockBytes = 4096;
  constexpr uint64_t kBase = 0x700000000000, kHandles = 0x10000;
  auto torch = [&](proto::EventKind kind, uint64_t address, uint64_t size, uint64_t allocated) {
    proto::Event e = g.event(kind, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, address, size);
    e.set_allocator_allocated_bytes(allocated);
    e.set_allocator_reserved_bytes(kPages * kPageBytes);
    g.emit(e);
  };
  auto map = [&](proto::EventKind kind, uint64_t page) {
    proto::Event e = g.event(kind, proto::LAYER_DRIVER, kind == proto::MAP ? proto::CU_MEM_MAP : proto::CU_MEM_UNMAP, 0,
                             kBase + page * kPageBytes, kPageBytes);
    if (kind == proto::MAP) e.set_handle(kHandles + page);
    g.emit(e);
  };
  g.emit(g.event(proto::ADDRESS_RESERVE, proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_RESERVE, -1, kBase,
                 2 * kPages * kPageBytes));
  for (uint64_t page = 0; page < kPages; ++page) {
    g.emit(g.event(proto::ALLOC, proto::LAYER_DRIVER, proto::CU_MEM_CREATE, 0, kHandles + page, kPageBytes));
    map(proto::MAP, page);
  }
  torch(proto::ALLOC, kBase, kBlockBytes, kBlockBytes);
  uint64_t events = 2 * kPages + 2;
  do {
    map(proto::UNMAP, kPages / 2);
    torch(proto::ALLOC, kBase + kBlockBytes, kBlockBytes, 2 * kBlockBytes);
    map(proto::MAP, kPages / 2);
    torch(proto::FREE, kBase + kBlockBytes, 0, kBlockBytes);
    events += 4;
  } while (!g.full());
  return events;
}

uint64_t oom_live(Generator& g) {
  constexpr uint64_t kStacks = 50'000, kOoms = 150;
  uint64_t events = 0;
  while (!g.full()) {
    uint64_t stack = 1 + events % kStacks;
    if (events < kStacks) {
      proto::Record r;
      r.mutable_stack()->set_id(stack);
      r.mutable_stack()->add_frames(0x1000 + stack);
      r.mutable_stack()->add_frames(0x2000 + stack);
      g.emit(r);
    }
    g.emit(g.event(proto::ALLOC, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x10000000 + events * 0x1000, 16, stack));
    ++events;
  }
  for (uint64_t i = 0; i < kOoms; ++i, ++events) {
    proto::Event e = g.event(proto::OOM, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0, 1 << 30, 1);
    e.set_result(2);
    e.set_device_free_bytes(1);
    e.set_device_total_bytes(2ull << 30);
    g.emit(e);
  }
  return events;
}

struct NamedShape {
  const char* name;
  Shape make;
};
constexpr NamedShape kShapes[] = {
    {"deep_stack", deep_stack},
    {"long_module_path", long_module_path},
    {"many_devices", many_devices},
    {"graph_launches", graph_launches},
    {"timeline_blocks", timeline_blocks},
    {"modules_descending", modules_descending},
    {"long_python_names", long_python_names},
    {"many_notices", many_notices},
    {"remap_pages", remap_pages},
    {"oom_live", oom_live},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: gen_adversarial SHAPE OUT.mtrace [BYTES]\nshapes:");
    for (const NamedShape& s : kShapes) std::fprintf(stderr, " %s", s.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  uint64_t target = argc == 4 ? std::strtoull(argv[3], nullptr, 10) : (1 << 20);
  for (const NamedShape& s : kShapes) {
    if (std::strcmp(s.name, argv[1]) != 0) continue;
    uint64_t units = 0;
    {
      Generator g(argv[2], target);
      units = s.make(g);
    }
    std::FILE* f = std::fopen(argv[2], "rb");
    std::fseek(f, 0, SEEK_END);
    long bytes = std::ftell(f);
    std::fclose(f);
    std::printf("%s: %llu units, %ld bytes\n", s.name, (unsigned long long)units, bytes);
    return 0;
  }
  std::fprintf(stderr, "gen_adversarial: unknown shape '%s'\n", argv[1]);
  return 2;
}
