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
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "memtrace.pb.h"
#include "trace_writer.h"

namespace {

using memtrace::proto::Record;
using memtrace_bench::event;
using memtrace_bench::TorchWorkload;
using memtrace_bench::TraceWriter;

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

void write_stacks(TraceWriter& trace, uint64_t stacks, bool torch) {
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

  TraceWriter trace(argv[1], flag(argc, argv, "--v1") ? 1 : flag(argc, argv, "--v2") ? 2 : 3);
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
