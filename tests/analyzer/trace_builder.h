// Test helper: builds .mtrace files the way the tracer lays them out (proto/memtrace.proto): the
// header skippable frame, then one zstd frame (content checksum on) per chunk of length-delimited
// Records. Events are added with small helpers; time deltas are in nanoseconds.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "memtrace.pb.h"
#include "trace_format.h"

namespace memtrace::test {

// The header frame (proto/trace_format.h) of format `version`; another `magic` makes a damaged one.
inline std::string header_frame(uint32_t version = 1, uint32_t magic = kHeaderFrameMagic) {
  uint8_t header[kHeaderBytes];
  encode_header_frame(version, header);
  for (int i = 0; i < 4; ++i) header[i] = uint8_t(magic >> (8 * i));
  return std::string(reinterpret_cast<const char*>(header), sizeof header);
}

inline std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
  return out;
}

inline std::string compress_frame(const std::string& content) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string out(ZSTD_compressBound(content.size()), '\0');
  size_t n = ZSTD_compress2(cctx, out.data(), out.size(), content.data(), content.size());
  ZSTD_freeCCtx(cctx);
  out.resize(n);
  return out;
}

class TraceBuilder {
 public:
  // A trace of format `version` (the header's; the records are whatever the test adds).
  explicit TraceBuilder(uint32_t version = 1) : bytes_(header_frame(version)) {}

  TraceBuilder& record(const proto::Record& r) {
    std::string body = r.SerializeAsString();
    pending_ += varint(body.size()) + body;
    return *this;
  }
  // Appends raw bytes to the current chunk's decompressed content (for malformed-record tests).
  TraceBuilder& raw(const std::string& content) {
    pending_ += content;
    return *this;
  }
  TraceBuilder& event(const proto::Event& e) {
    proto::Record r;
    *r.mutable_event() = e;
    return record(r);
  }
  // Closes the current chunk: everything recorded since the last one becomes one zstd frame.
  TraceBuilder& end_chunk() {
    chunk_offsets_.push_back(bytes_.size());
    bytes_ += compress_frame(pending_);
    pending_.clear();
    return *this;
  }
  const std::string& bytes() const { return bytes_; }
  const std::vector<size_t>& chunk_offsets() const { return chunk_offsets_; }  // file offset of each chunk

  TraceBuilder& start(uint64_t start_ns = 1'000'000'000, uint64_t start_unix_ns = 0) {
    proto::Record r;
    r.mutable_start()->set_pid(4242);
    r.mutable_start()->set_start_monotonic_ns(start_ns);
    r.mutable_start()->set_start_unix_ns(start_unix_ns);
    r.mutable_start()->add_argv("python");
    r.mutable_start()->add_argv("train.py");
    return record(r);
  }
  // The cut flags as the tracer writes them (Stack.native_frames_cut, python_frames_cut).
  TraceBuilder& stack(uint64_t id, std::vector<uint64_t> frames, bool native_frames_cut = false,
                      bool python_frames_cut = false) {
    proto::Record r;
    r.mutable_stack()->set_id(id);
    for (uint64_t f : frames) r.mutable_stack()->add_frames(f);
    r.mutable_stack()->set_native_frames_cut(native_frames_cut);
    r.mutable_stack()->set_python_frames_cut(python_frames_cut);
    return record(r);
  }
  TraceBuilder& python_frame(uint64_t id, const std::string& file, const std::string& function, uint32_t line) {
    proto::Record r;
    auto* f = r.mutable_python_frame();
    f->set_id(id);
    f->set_file(file);
    f->set_function(function);
    f->set_line(line);
    return record(r);
  }
  TraceBuilder& end(uint64_t events, int64_t delta_ns, proto::TraceEnd::How how = proto::TraceEnd::EXIT,
                    int32_t signal = 0) {
    proto::Record r;
    r.mutable_end()->set_events(events);
    r.mutable_end()->set_time_delta_ns(delta_ns);
    r.mutable_end()->set_how(how);
    r.mutable_end()->set_signal(signal);
    return record(r);
  }
  // The TraceStart of a trace that began by attach (proto TraceStart.origin): start() with the attach fields.
  TraceBuilder& attach_start(proto::TraceStart::Origin origin, uint32_t attach_number, bool driver_layer_attached,
                             bool torch_layer_attached, uint64_t start_ns = 1'000'000'000, uint64_t start_unix_ns = 0) {
    proto::Record r;
    proto::TraceStart* s = r.mutable_start();
    s->set_pid(4242);
    s->set_start_monotonic_ns(start_ns);
    s->set_start_unix_ns(start_unix_ns);
    s->add_argv("python");
    s->add_argv("train.py");
    s->set_origin(origin);
    s->set_attach_number(attach_number);
    s->set_driver_layer_attached(driver_layer_attached);
    s->set_torch_layer_attached(torch_layer_attached);
    return record(r);
  }
  // One allocation live at attach (proto LiveAtAttach); `address` 0 with blocks_unknown is an aggregate.
  TraceBuilder& live_at_attach(proto::Layer layer, proto::Api api, int32_t device, uint64_t address, uint64_t size,
                               bool blocks_unknown = false, proto::Memory memory = proto::MEMORY_DEVICE) {
    proto::Record r;
    proto::LiveAtAttach* l = r.mutable_live_at_attach();
    l->set_layer(layer);
    l->set_api(api);
    l->set_device(device);
    l->set_address(address);
    l->set_size(size);
    l->set_memory(memory);
    l->set_blocks_unknown(blocks_unknown);
    return record(r);
  }
  // A PyTorch caching-allocator block live at attach (LAYER_BLOCK, TORCH_ALLOCATOR).
  TraceBuilder& torch_block_at_attach(int32_t device, uint64_t address, uint64_t size) {
    return live_at_attach(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, device, address, size);
  }
  // A device's totals at attach (proto AttachBaseline); a negative PyTorch total is left out.
  TraceBuilder& attach_baseline(int32_t device, uint64_t device_free_bytes, uint64_t device_total_bytes,
                                int64_t allocator_allocated_bytes = -1, int64_t allocator_reserved_bytes = -1) {
    proto::Record r;
    proto::AttachBaseline* b = r.mutable_attach_baseline();
    b->set_device(device);
    b->set_device_free_bytes(device_free_bytes);
    b->set_device_total_bytes(device_total_bytes);
    if (allocator_allocated_bytes >= 0) b->set_allocator_allocated_bytes(uint64_t(allocator_allocated_bytes));
    if (allocator_reserved_bytes >= 0) b->set_allocator_reserved_bytes(uint64_t(allocator_reserved_bytes));
    return record(r);
  }
  TraceBuilder& notice(proto::Notice::Code code, const std::string& message) {
    proto::Record r;
    r.mutable_notice()->set_code(code);
    r.mutable_notice()->set_message(message);
    return record(r);
  }

 private:
  std::string bytes_;
  std::string pending_;
  std::vector<size_t> chunk_offsets_;
};

// Event constructors. `delta_ns` is the time since the previous event.
inline proto::Event make_event(proto::EventKind kind, proto::Layer layer, proto::Api api, int32_t device,
                               uint64_t address, uint64_t size, int64_t delta_ns = 0, uint64_t stack_id = 0) {
  proto::Event e;
  e.set_kind(kind);
  e.set_layer(layer);
  e.set_api(api);
  e.set_device(device);
  e.set_address(address);
  e.set_size(size);
  e.set_time_delta_ns(delta_ns);
  e.set_stack_id(stack_id);
  return e;
}
inline proto::Event driver_alloc(int32_t device, uint64_t address, uint64_t size, int64_t delta_ns = 0,
                                 uint64_t stack_id = 0, proto::Api api = proto::CUDA_MALLOC) {
  return make_event(proto::ALLOC, proto::LAYER_DRIVER, api, device, address, size, delta_ns, stack_id);
}
// A free that, like cudaFree, does not say its size.
inline proto::Event driver_free(int32_t device, uint64_t address, int64_t delta_ns = 0,
                                proto::Api api = proto::CUDA_FREE) {
  return make_event(proto::FREE, proto::LAYER_DRIVER, api, device, address, 0, delta_ns);
}
inline proto::Event torch_event(proto::EventKind kind, int32_t device, uint64_t address, uint64_t size,
                                uint64_t allocated_total, uint64_t reserved_total, int64_t delta_ns = 0,
                                uint64_t stack_id = 0) {
  proto::Event e =
      make_event(kind, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, device, address, size, delta_ns, stack_id);
  e.set_allocator_allocated_bytes(allocated_total);
  e.set_allocator_reserved_bytes(reserved_total);
  return e;
}
inline proto::Event finalizing(int64_t delta_ns = 0) {
  return make_event(proto::PYTHON_FINALIZING, proto::LAYER_UNKNOWN, proto::API_UNKNOWN, -1, 0, 0, delta_ns);
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

// The whole file at `path` ("" where it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A path under the test's temporary directory, unique per test name.
std::string temp_path(const std::string& name);

// The standard output of `memtrace ARGS` (the analyzer under test, MEMTRACE_BIN), expecting exit status 0 (a
// test failure otherwise). `args` is given to the shell as written.
std::string memtrace_stdout(const std::string& args);

// `memtrace ARGS` (given to the shell as written): its exit status and what it wrote to each stream.
struct MemtraceRun {
  int exit_code = -1;  // -1: it did not exit (a signal)
  std::string out, err;
};
MemtraceRun run_memtrace_binary(const std::string& args);

}  // namespace memtrace::test
