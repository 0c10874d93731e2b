// Traces for the stack-shaped exports' tests (speedscope, folded), built with trace_builder.h: used by
// stack_exports_test.cc, which checks the exports exactly, and by write_stack_export_traces.cc, which writes them
// for check_speedscope_schema.py to validate against speedscope's published schema.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "stacks/stack_table.h"
#include "trace_builder.h"

namespace memtrace::test {

inline constexpr uint64_t kStackExportSegmentBytes = 64 << 20, kStackExportMs = 1'000'000;

// Python frames 1 train.py:10 main, 2 model.py:20 forward, 3 "a;b.py":7 "odd\nname". Stacks (innermost first):
// 11 = forward < main, 12 = main, 13 = odd name < main. Events, 1 ms apart from 1 ms on:
//   device 0: a 64 MiB cudaMalloc segment (no stack), PyTorch blocks 1000 B (s11), 3000 B (s12), 500 B (s13)
//             -> peak allocated 4500 B at 4 ms; then the 3000 B block freed and 2000 B (s11) allocated (3500 B).
//   device 1: cudaMalloc 8192 B (s12), 100 B (no stack) -> peak 8292 B at 8 ms; then the 100 B freed.
// Live at exit (the end): device 0's blocks of s11 (1000 + 2000 B) and s13 (500 B); device 1's 8192 B (s12). The
// segment is not a leak candidate (PyTorch's cache: reserved, not allocated).
// Every allocation of the allocated kind: s12 3000 + 8192 = 11192, s11 3000, s13 500, no stack 100 (the segment is
// not of that kind on device 0, which has PyTorch's blocks).
inline std::string two_device_trace_bytes() {
  constexpr uint64_t kSegment = kStackExportSegmentBytes, kMs = kStackExportMs;
  TraceBuilder b;
  b.start();
  b.python_frame(1, "train.py", "main", 10).python_frame(2, "model.py", "forward", 20);
  b.python_frame(3, "a;b.py", "odd\nname", 7);
  b.stack(11, {kPythonFrameBit | 2, kPythonFrameBit | 1});
  b.stack(12, {kPythonFrameBit | 1});
  b.stack(13, {kPythonFrameBit | 3, kPythonFrameBit | 1});
  b.event(driver_alloc(0, 0x10000000, kSegment, kMs));
  b.event(torch_event(proto::ALLOC, 0, 0x10000000, 1000, 1000, kSegment, kMs, 11));
  b.event(torch_event(proto::ALLOC, 0, 0x10001000, 3000, 4000, kSegment, kMs, 12));
  b.event(torch_event(proto::ALLOC, 0, 0x10002000, 500, 4500, kSegment, kMs, 13));
  b.event(torch_event(proto::FREE, 0, 0x10001000, 3000, 1500, kSegment, kMs));
  b.event(torch_event(proto::ALLOC, 0, 0x10003000, 2000, 3500, kSegment, kMs, 11));
  b.event(driver_alloc(1, 0x20000000, 8192, kMs, 12));
  b.event(driver_alloc(1, 0x20010000, 100, kMs));
  b.event(driver_free(1, 0x20010000, kMs));
  b.end(9, 0).end_chunk();
  return b.bytes();
}

// A trace of a C++ program: native frames only (addresses outside every module the trace names), a stack id no
// Stack record defines, and a PYTHON_FINALIZING-free end with everything freed.
inline std::string native_trace_bytes() {
  TraceBuilder b;
  b.start();
  b.stack(5, {0x401234, 0x401100, 0x400f00});
  b.event(driver_alloc(0, 0x30000000, 4096, kStackExportMs, 5));
  b.event(driver_alloc(0, 0x30010000, 1024, kStackExportMs, 77));
  b.event(driver_free(0, 0x30000000, kStackExportMs));
  b.event(driver_free(0, 0x30010000, kStackExportMs));
  b.end(4, 0).end_chunk();
  return b.bytes();
}

// A trace with no event: no device, no peak; only the (empty) alloc_space profile.
inline std::string no_event_trace_bytes() {
  TraceBuilder b;
  b.start().end(0, 0).end_chunk();
  return b.bytes();
}

// Every trace above, by the file name the writer gives it.
inline std::vector<std::pair<std::string, std::string>> stack_export_traces() {
  return {{"two_devices.mtrace", two_device_trace_bytes()},
          {"native_stacks.mtrace", native_trace_bytes()},
          {"no_events.mtrace", no_event_trace_bytes()}};
}

}  // namespace memtrace::test
