// Writes seeds for fuzz_pipeline (input format: pipeline_input.h).
//   make_pipeline_seed TRACE OUT [MAX_BYTES]: the records of an .mtrace file (as the analyzer's reader hands
//     them on, so version 2's left-out totals and version 3's sticky fields are filled in), in chunks of at
//     most 2000 records, under the file's format version. Past MAX_BYTES (default 300000) of records the
//     rest of the events are left out; the records they would need (stacks, modules, Python frames,
//     threads, notices) and the TraceEnd are kept, as long as they fit.
//   make_pipeline_seed --edge-cases DIR: hand-made traces of the rarer paths (graph capture / instantiate /
//     launch, VMM map / unmap, an OOM with its DEVICE_USAGE sample, several devices, PYTHON_FINALIZING, NVTX
//     ranges, a trace that began by attach).
// Exit 0, or 2 with one line on stderr.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "memtrace.pb.h"
#include "pipeline_input.h"
#include "read/trace_reader.h"

namespace {

namespace proto = memtrace::proto;
using memtrace::fuzz::Chunk;
using memtrace::fuzz::PipelineInput;

constexpr size_t kRecordsPerChunk = 2000;

bool write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return bool(out);
}

void add(PipelineInput* in, const proto::Record& record) {
  if (in->chunks.empty() || in->chunks.back().records.size() >= kRecordsPerChunk) in->chunks.emplace_back();
  in->chunks.back().records.push_back(record.SerializeAsString());
}

int convert(const std::string& trace, const std::string& out, size_t max_bytes) {
  PipelineInput in;
  size_t bytes = 0;
  uint64_t dropped = 0;
  memtrace::TraceReadSummary read;
  try {
    read = memtrace::read_trace(trace, [&](const proto::Record& record) {
      std::string serialized = record.SerializeAsString();
      bool event = record.has_event();
      if (bytes + serialized.size() > max_bytes && (event || bytes + serialized.size() > max_bytes * 11 / 10)) {
        ++dropped;
        return;
      }
      bytes += serialized.size();
      add(&in, record);
    });
  } catch (const memtrace::TraceError& e) {
    std::fprintf(stderr, "make_pipeline_seed: %s: %s\n", trace.c_str(), e.what());
    return 2;
  }
  in.version = uint8_t(read.format_version);
  if (!write_file(out, memtrace::fuzz::serialize_input(in))) {
    std::fprintf(stderr, "make_pipeline_seed: %s: cannot write\n", out.c_str());
    return 2;
  }
  std::printf("%s: %llu records, %llu left out, %zu chunks, version %u\n", out.c_str(),
              (unsigned long long)(read.records - dropped), (unsigned long long)dropped, in.chunks.size(),
              read.format_version);
  return 0;
}

// Builders for the hand-made traces.
constexpr uint64_t kMiB = 1 << 20;

proto::Record start_record() {
  proto::Record r;
  proto::TraceStart* s = r.mutable_start();
  s->set_pid(4242);
  s->set_ppid(1);
  s->set_hostname("h200");
  s->add_argv("python3");
  s->add_argv("job.py");
  s->set_start_monotonic_ns(1000000000);
  s->set_start_unix_ns(1700000000000000000ull);
  s->set_tracer_version("fuzz-seed");
  s->set_flush_interval_ms(1000);
  s->set_max_native_frames(64);
  s->set_max_native_frames_python(32);
  return r;
}

proto::Record event(proto::EventKind kind, proto::Layer layer, proto::Api api, int32_t device, uint64_t address,
                    uint64_t size, uint64_t stack_id = 0) {
  proto::Record r;
  proto::Event* e = r.mutable_event();
  e->set_kind(kind);
  e->set_layer(layer);
  e->set_api(api);
  e->set_tid(4242);
  e->set_device(device);
  e->set_stream(0);
  e->set_time_delta_ns(1000);
  e->set_address(address);
  e->set_size(size);
  e->set_stack_id(stack_id);
  return r;
}

proto::Record end_record(uint64_t events) {
  proto::Record r;
  r.mutable_end()->set_events(events);
  r.mutable_end()->set_time_delta_ns(1000);
  return r;
}

// A module, two Python frames and a stack mixing them: stack id 1.
void add_stack(PipelineInput* in) {
  proto::Record m;
  m.mutable_module()->set_path("/usr/lib/libcudart.so.12");
  m.mutable_module()->set_load_address(0x7f0000000000);
  m.mutable_module()->set_start(0x7f0000001000);
  m.mutable_module()->set_end(0x7f0000100000);
  add(in, m);
  for (uint64_t id = 1; id <= 2; ++id) {
    proto::Record f;
    f.mutable_python_frame()->set_id(id);
    f.mutable_python_frame()->set_file("train.py");
    f.mutable_python_frame()->set_function(id == 1 ? "step" : "<module>");
    f.mutable_python_frame()->set_line(uint32_t(10 * id));
    add(in, f);
  }
  proto::Record s;
  s.mutable_stack()->set_id(1);
  for (uint64_t frame : {0x7f0000002345ull, (1ull << 63) | 1, (1ull << 63) | 2, 0x7f0000003000ull})
    s.mutable_stack()->add_frames(frame);
  add(in, s);
}

PipelineInput graphs() {
  PipelineInput in;
  add(&in, start_record());
  add_stack(&in);
  proto::Record captured_alloc =
      event(proto::ALLOC, proto::LAYER_BLOCK, proto::CUDA_MALLOC_ASYNC, 0, 0xA000000, 3 * kMiB, 1);
  captured_alloc.mutable_event()->set_capture_id(7);
  proto::Record captured_free = event(proto::FREE, proto::LAYER_BLOCK, proto::CUDA_FREE_ASYNC, 0, 0xA000000, 0, 1);
  captured_free.mutable_event()->set_capture_id(7);
  proto::Record captured = event(proto::GRAPH_CAPTURED, proto::LAYER_UNKNOWN, proto::CU_STREAM_END_CAPTURE, 0, 0, 0);
  captured.mutable_event()->set_graph(0x6A);
  captured.mutable_event()->set_capture_id(7);
  proto::Record node =
      event(proto::ALLOC, proto::LAYER_BLOCK, proto::CU_GRAPH_ADD_MEM_ALLOC_NODE, 0, 0xB000000, 5 * kMiB, 1);
  node.mutable_event()->set_graph(0x6A);
  proto::Record instantiate =
      event(proto::GRAPH_INSTANTIATE, proto::LAYER_UNKNOWN, proto::CU_GRAPH_INSTANTIATE, 0, 0xE1, 0);
  instantiate.mutable_event()->set_graph(0x6A);
  proto::Record launch = event(proto::GRAPH_LAUNCH, proto::LAYER_UNKNOWN, proto::CU_GRAPH_LAUNCH, 0, 0xE1, 0);
  proto::Record sample = event(proto::POOL_RESERVED, proto::LAYER_UNKNOWN, proto::CU_GRAPH_LAUNCH, 0, 0, 8 * kMiB);
  for (const proto::Record& r : {captured_alloc, captured_free, captured, node, instantiate, launch, sample, launch,
                                 event(proto::FREE, proto::LAYER_BLOCK, proto::CUDA_FREE_ASYNC, 0, 0xB000000, 0)})
    add(&in, r);
  add(&in, end_record(9));
  return in;
}

PipelineInput vmm() {
  PipelineInput in;
  add(&in, start_record());
  add_stack(&in);
  add(&in, event(proto::ALLOC, proto::LAYER_DRIVER, proto::CU_MEM_CREATE, 0, 0x1, 2 * kMiB, 1));
  add(&in,
      event(proto::ADDRESS_RESERVE, proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_RESERVE, 0, 0x7f0000000000, 64 * kMiB));
  proto::Record map = event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, 0, 0x7f0000000000, 2 * kMiB);
  map.mutable_event()->set_handle(0x1);
  add(&in, map);
  in.chunks.emplace_back();  // the rest in a second chunk
  add(&in, event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, 0, 0x7f0000000000, 2 * kMiB));
  add(&in, event(proto::ADDRESS_FREE, proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_FREE, 0, 0x7f0000000000, 64 * kMiB));
  add(&in, event(proto::FREE, proto::LAYER_DRIVER, proto::CU_MEM_RELEASE, 0, 0x1, 0));
  add(&in, end_record(6));
  return in;
}

// PyTorch on two devices (and a third with a plain cudaMalloc), an OOM on device 1 followed by its
// DEVICE_USAGE sample, then PYTHON_FINALIZING with blocks still live.
PipelineInput oom_devices_finalizing() {
  PipelineInput in;
  in.version = 1;
  add(&in, start_record());
  add_stack(&in);
  proto::Record thread;
  thread.mutable_thread()->set_tid(4242);
  thread.mutable_thread()->set_name("pt_main_thread");
  add(&in, thread);
  uint64_t events = 0;
  for (int32_t device : {0, 1}) {
    add(&in, event(proto::ALLOC, proto::LAYER_DRIVER, proto::CUDA_MALLOC, device,
                   0x7000000000 + uint64_t(device) * 0x100000000, 20 * kMiB, 1));
    proto::Record block = event(proto::ALLOC, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, device,
                                0x7000000000 + uint64_t(device) * 0x100000000, 8 * kMiB, 1);
    block.mutable_event()->set_allocator_allocated_bytes(8 * kMiB);
    block.mutable_event()->set_allocator_reserved_bytes(20 * kMiB);
    add(&in, block);
    events += 2;
  }
  add(&in, event(proto::ALLOC, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 5, 0x9000000000, 1 * kMiB, 1));
  proto::Record oom = event(proto::OOM, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 1, 0, 140ull << 30, 1);
  oom.mutable_event()->set_device_free_bytes(1 * kMiB);
  oom.mutable_event()->set_device_total_bytes(150754820096ull);
  oom.mutable_event()->set_allocator_allocated_bytes(8 * kMiB);
  oom.mutable_event()->set_allocator_reserved_bytes(20 * kMiB);
  add(&in, oom);
  proto::Record usage = event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::TORCH_ALLOCATOR, 1, 0, 0);
  usage.mutable_event()->set_device_free_bytes(1 * kMiB);
  usage.mutable_event()->set_device_total_bytes(150754820096ull);
  usage.mutable_event()->set_process_used_bytes(600 * kMiB);
  usage.mutable_event()->set_other_processes_used_bytes(140ull << 30);
  add(&in, usage);
  proto::Record notice;
  notice.mutable_notice()->set_code(proto::Notice::EVENTS_DROPPED);
  notice.mutable_notice()->set_message("the writer fell behind");
  notice.mutable_notice()->set_count(3);
  add(&in, notice);
  add(&in, event(proto::PYTHON_FINALIZING, proto::LAYER_UNKNOWN, proto::API_UNKNOWN, -1, 0, 0));
  events += 4;
  proto::Record end = end_record(events);
  end.mutable_end()->set_how(proto::TraceEnd::SIGNAL);
  end.mutable_end()->set_signal(9);
  add(&in, end);
  return in;
}

proto::Record range_name(uint64_t id, const char* name) {
  proto::Record r;
  r.mutable_range_name()->set_id(id);
  r.mutable_range_name()->set_name(name);
  return r;
}

proto::Record range_event(proto::RangeEvent::Kind kind, uint64_t name_id, uint64_t time_us, uint64_t range_id = 0) {
  proto::Record r;
  r.mutable_range_event()->set_kind(kind);
  r.mutable_range_event()->set_name_id(name_id);
  r.mutable_range_event()->set_tid(4242);
  r.mutable_range_event()->set_time_us(time_us);
  r.mutable_range_event()->set_range_id(range_id);
  return r;
}

// NVTX ranges (RangeName, RangeEvent) around allocations: nested pushes, a start/end range, a mark, a pop with no
// push, and a push left open; across two chunks.
PipelineInput nvtx_ranges() {
  PipelineInput in;
  add(&in, start_record());
  add_stack(&in);
  add(&in, range_name(1, "step"));
  add(&in, range_event(proto::RangeEvent::PUSH, 1, 1));
  add(&in, range_name(2, "forward"));
  add(&in, range_event(proto::RangeEvent::PUSH, 2, 2));
  add(&in, event(proto::ALLOC, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x7000000000, 2 * kMiB, 1));
  add(&in, range_event(proto::RangeEvent::POP, 0, 3));
  add(&in, range_event(proto::RangeEvent::POP, 0, 4));
  in.chunks.emplace_back();
  add(&in, range_name(3, "optimizer"));
  add(&in, range_event(proto::RangeEvent::START, 3, 5, 1));
  add(&in, range_event(proto::RangeEvent::MARK, 1, 5));
  add(&in, event(proto::FREE, proto::LAYER_DRIVER, proto::CUDA_FREE, 0, 0x7000000000, 0));
  add(&in, range_event(proto::RangeEvent::END, 0, 6, 1));
  add(&in, range_event(proto::RangeEvent::POP, 0, 7));
  add(&in, range_event(proto::RangeEvent::PUSH, 1, 8));
  add(&in, end_record(2));
  return in;
}

// A trace that began by attach (proto TraceStart.origin): the live set at attach (a driver segment, PyTorch blocks
// in it, an aggregate of unlisted blocks, an expandable segment's handle, an address reservation), the baselines
// of two devices, frees of a block live at attach and of unlisted blocks, then a DETACH end.
PipelineInput attach() {
  PipelineInput in;
  proto::Record start = start_record();
  start.mutable_start()->set_origin(proto::TraceStart::ATTACH_INJECTED);
  start.mutable_start()->set_attach_number(2);
  start.mutable_start()->set_driver_layer_attached(true);
  start.mutable_start()->set_torch_layer_attached(true);
  add(&in, start);
  add_stack(&in);
  auto live = [&](proto::Layer layer, proto::Api api, int32_t device, uint64_t address, uint64_t size,
                  bool blocks_unknown = false) {
    proto::Record r;
    proto::LiveAtAttach* l = r.mutable_live_at_attach();
    l->set_layer(layer);
    l->set_api(api);
    l->set_device(device);
    l->set_address(address);
    l->set_size(size);
    l->set_blocks_unknown(blocks_unknown);
    l->set_expandable_segment(api == proto::CU_MEM_CREATE);
    add(&in, r);
  };
  live(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x7000000000, 20 * kMiB);
  live(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0x7000000000, 2 * kMiB);
  live(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0x7000200000, 4 * kMiB);
  live(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 1, 0, 8 * kMiB, /*blocks_unknown=*/true);
  live(proto::LAYER_DRIVER, proto::CU_MEM_CREATE, 1, 0x55, 2 * kMiB);
  live(proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_RESERVE, 1, 0x7100000000, 64 * kMiB);
  for (int32_t device : {0, 1}) {
    proto::Record r;
    proto::AttachBaseline* b = r.mutable_attach_baseline();
    b->set_device(device);
    b->set_device_free_bytes(60 * kMiB);
    b->set_device_total_bytes(80 * kMiB);
    b->set_allocator_allocated_bytes(device == 0 ? 6 * kMiB : 8 * kMiB);
    b->set_allocator_reserved_bytes(device == 0 ? 20 * kMiB : 10 * kMiB);
    add(&in, r);
  }
  proto::Record free_block = event(proto::FREE, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0x7000000000, 2 * kMiB);
  free_block.mutable_event()->set_allocator_allocated_bytes(4 * kMiB);
  free_block.mutable_event()->set_allocator_reserved_bytes(20 * kMiB);
  add(&in, free_block);
  in.chunks.emplace_back();
  for (uint64_t i = 0; i < 3; ++i) {
    proto::Record r =
        event(proto::FREE, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 1, 0x7200000000 + i * kMiB, 4 * kMiB);
    r.mutable_event()->set_allocator_allocated_bytes(i < 2 ? 4 * kMiB * (1 - i) : 0);
    r.mutable_event()->set_allocator_reserved_bytes(10 * kMiB);
    add(&in, r);
  }
  add(&in, event(proto::FREE, proto::LAYER_DRIVER, proto::CU_MEM_RELEASE, 1, 0x55, 0));
  add(&in, event(proto::ADDRESS_FREE, proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_FREE, 1, 0x7100000000, 64 * kMiB));
  add(&in, event(proto::ALLOC, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0x7000800000, kMiB, 1));
  proto::Record end = end_record(7);
  end.mutable_end()->set_how(proto::TraceEnd::DETACH);
  add(&in, end);
  return in;
}

int edge_cases(const std::string& dir) {
  const std::pair<const char*, PipelineInput> seeds[] = {{"edge_graphs_v3.bin", graphs()},
                                                         {"edge_vmm_v3.bin", vmm()},
                                                         {"edge_oom_devices_finalizing_v1.bin",
                                                          oom_devices_finalizing()},
                                                         {"edge_nvtx_ranges_v3.bin", nvtx_ranges()},
                                                         {"edge_attach_v3.bin", attach()}};
  for (const auto& [name, in] : seeds) {
    std::string path = dir + "/" + name;
    if (!write_file(path, memtrace::fuzz::serialize_input(in))) {
      std::fprintf(stderr, "make_pipeline_seed: %s: cannot write\n", path.c_str());
      return 2;
    }
    std::printf("%s\n", path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--edge-cases") return edge_cases(argv[2]);
  if (argc == 3 || argc == 4) return convert(argv[1], argv[2], argc == 4 ? std::stoul(argv[3]) : 300000);
  std::fprintf(stderr, "usage: make_pipeline_seed TRACE OUT [MAX_BYTES] | make_pipeline_seed --edge-cases DIR\n");
  return 2;
}
