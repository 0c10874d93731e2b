// The traces the perfetto and pprof export tests build (perfetto_export_test.cc, pprof_export_test.cc, and
// pprof_fixture.cc, which writes the pprof one for the `go tool pprof` test), with the values worked out by hand in
// those tests.
#pragma once

#include <cstdint>
#include <string>

#include "analysis_trace.h"
#include "trace_builder.h"

namespace memtrace::test {

inline proto::Record range_name_record(uint64_t id, const std::string& name) {
  proto::Record r;
  r.mutable_range_name()->set_id(id);
  r.mutable_range_name()->set_name(name);
  return r;
}

inline proto::Record range_event_record(proto::RangeEvent::Kind kind, uint64_t name_id, uint32_t tid,
                                        uint64_t time_us) {
  proto::Record r;
  auto* e = r.mutable_range_event();
  e->set_kind(kind);
  e->set_name_id(name_id);
  e->set_tid(tid);
  e->set_time_us(time_us);
  return r;
}

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kSegment = 0x7f0000000000;

// Device 0, thread 7, times in ns from the start (format version 1: time deltas in ns):
//   e0  1000  cudaMalloc 8 MiB (the segment)
//            [NVTX push "step" at 2 us]
//   e1  3000  block 1 MiB        (PyTorch: allocated 1 MiB, reserved 8 MiB)
//            [NVTX push "backward" at 4 us]
//   e2  5000  block 2 MiB        (allocated 3 MiB)
//            [NVTX pop, pop at 6 us; push "step" at 7 us]
//   e3  8000  the 2 MiB block freed (allocated 1 MiB)
//   e4  9000  DEVICE_USAGE: 60 GiB free of 80 GiB, other processes 5 GiB
//   e5 10000  cudaMalloc of 16 GiB fails (OOM, 60 GiB free of 80)
//            [NVTX pop at 11 us]
// Iterations (NVTX "step"): events e1, e2 and e3..e5; phases: e2 backward (the nested range), the rest forward.
inline std::string perfetto_export_trace() {
  TraceBuilder b;
  b.start();
  b.event(driver_alloc(0, kSegment, 8 * kMiB, 1000));
  b.record(range_name_record(1, "step")).record(range_event_record(proto::RangeEvent::PUSH, 1, 7, 2));
  b.event(torch_event(proto::ALLOC, 0, kSegment, kMiB, kMiB, 8 * kMiB, 2000));
  b.record(range_name_record(2, "backward")).record(range_event_record(proto::RangeEvent::PUSH, 2, 7, 4));
  b.event(torch_event(proto::ALLOC, 0, kSegment + kMiB, 2 * kMiB, 3 * kMiB, 8 * kMiB, 2000));
  b.record(range_event_record(proto::RangeEvent::POP, 0, 7, 6))
      .record(range_event_record(proto::RangeEvent::POP, 0, 7, 6));
  b.record(range_event_record(proto::RangeEvent::PUSH, 1, 7, 7));
  b.event(torch_event(proto::FREE, 0, kSegment + kMiB, 2 * kMiB, kMiB, 8 * kMiB, 3000));
  proto::Event usage = make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, 0, 0, 0, 1000);
  usage.set_device_free_bytes(60 * kGiB);
  usage.set_device_total_bytes(80 * kGiB);
  usage.set_other_processes_used_bytes(5 * kGiB);
  b.event(usage);
  proto::Event oom = make_event(proto::OOM, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0, 16 * kGiB, 1000);
  oom.set_result(2);
  oom.set_device_free_bytes(60 * kGiB);
  oom.set_device_total_bytes(80 * kGiB);
  b.event(oom);
  b.record(range_event_record(proto::RangeEvent::POP, 0, 7, 11));
  b.end(6, 0).end_chunk();
  return b.bytes();
}

// Device 0, PyTorch blocks in one 32 MiB segment, thread 7, Python stacks (innermost first):
//   stack 1: train.py:20 step, train.py:10 main       stack 2: train.py:21 step, train.py:10 main
//   e0  cudaMalloc 32 MiB (the segment, no stack)
//            [NVTX push "step"]
//   e1  block b1 4 MiB, stack 1                       (allocated 4 MiB)
//            [NVTX push "backward"]
//   e2  block b2 8 MiB, stack 2                       (allocated 12 MiB: the peak)
//            [NVTX pop, pop; push "step"]
//   e3  b2 freed                                      (allocated 4 MiB)
//   e4  block b3 2 MiB, stack 1                       (allocated 6 MiB)
//            [NVTX pop]
// Iterations (NVTX "step"): e1, e2 and e3, e4; phases: e2 backward, e1, e3, e4 forward. Live at the peak: b1, b2;
// at exit: b1, b3.
inline std::string pprof_export_trace() {
  constexpr uint64_t kPython = uint64_t{1} << 63;
  TraceBuilder b;
  b.start();
  b.python_frame(1, "train.py", "main", 10).python_frame(2, "train.py", "step", 20);
  b.python_frame(3, "train.py", "step", 21);
  b.stack(1, {kPython | 2, kPython | 1}).stack(2, {kPython | 3, kPython | 1});
  b.event(driver_alloc(0, kSegment, 32 * kMiB, 1000));
  b.record(range_name_record(1, "step")).record(range_event_record(proto::RangeEvent::PUSH, 1, 7, 2));
  b.event(torch_event(proto::ALLOC, 0, kSegment, 4 * kMiB, 4 * kMiB, 32 * kMiB, 2000, 1));
  b.record(range_name_record(2, "backward")).record(range_event_record(proto::RangeEvent::PUSH, 2, 7, 4));
  b.event(torch_event(proto::ALLOC, 0, kSegment + 4 * kMiB, 8 * kMiB, 12 * kMiB, 32 * kMiB, 2000, 2));
  b.record(range_event_record(proto::RangeEvent::POP, 0, 7, 6))
      .record(range_event_record(proto::RangeEvent::POP, 0, 7, 6));
  b.record(range_event_record(proto::RangeEvent::PUSH, 1, 7, 7));
  b.event(torch_event(proto::FREE, 0, kSegment + 4 * kMiB, 8 * kMiB, 4 * kMiB, 32 * kMiB, 3000));
  b.event(torch_event(proto::ALLOC, 0, kSegment + 4 * kMiB, 2 * kMiB, 6 * kMiB, 32 * kMiB, 1000, 1));
  b.record(range_event_record(proto::RangeEvent::POP, 0, 7, 10));
  b.end(5, 0).end_chunk();
  return b.bytes();
}

}  // namespace memtrace::test
