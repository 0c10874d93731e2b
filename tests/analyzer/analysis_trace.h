// A small PyTorch-style trace shared by the analysis and CLI tests. Device 0, one event per ms:
//   e0  1 ms  cudaMalloc segment 8 MiB                 (stack 11)
//   e1  2 ms  block A 1 MiB            allocated 1 MiB (stack 10)  reserved 8 MiB
//   e2  3 ms  block B 3 MiB            allocated 4 MiB (stack 11)
//   e3  4 ms  block C 1 MiB            allocated 5 MiB (stack 10)  <- peak allocated
//   e4  5 ms  free B                   allocated 2 MiB
//   e5  6 ms  block D 1 MiB            allocated 3 MiB (stack 10)
//   e6  7 ms  PYTHON_FINALIZING: live A, C, D (stack 10, at 2, 4, 6 ms)
//   e7  8 ms  free A                   end of trace: duration 8 ms
// Stack 10 = train.py:42 train_step <- train.py:50 <module>; stack 11 = train.py:50 <module>.
#pragma once

#include "trace_builder.h"

namespace memtrace::test {

inline constexpr uint64_t kMiB = 1 << 20;
inline constexpr uint64_t kPy = 1ull << 63;

inline TraceBuilder small_torch_trace() {
  constexpr int64_t ms = 1'000'000;
  TraceBuilder b;
  b.start().python_frame(1, "train.py", "train_step", 42).python_frame(2, "train.py", "<module>", 50);
  b.stack(10, {kPy | 1, kPy | 2}).stack(11, {kPy | 2});
  b.notice(proto::Notice::TORCH_HOOK_MISSING, "example notice").end_chunk();
  b.event(driver_alloc(0, 0x100000, 8 * kMiB, ms, 11));
  b.event(torch_event(proto::ALLOC, 0, 0x100000, kMiB, kMiB, 8 * kMiB, ms, 10));
  b.event(torch_event(proto::ALLOC, 0, 0x200000, 3 * kMiB, 4 * kMiB, 8 * kMiB, ms, 11)).end_chunk();
  b.event(torch_event(proto::ALLOC, 0, 0x500000, kMiB, 5 * kMiB, 8 * kMiB, ms, 10));
  b.event(torch_event(proto::FREE, 0, 0x200000, 0, 2 * kMiB, 8 * kMiB, ms));
  b.event(torch_event(proto::ALLOC, 0, 0x600000, kMiB, 3 * kMiB, 8 * kMiB, ms, 10));
  b.event(finalizing(ms));
  b.event(torch_event(proto::FREE, 0, 0x100000, 0, 2 * kMiB, 8 * kMiB, ms)).end_chunk();
  return b;
}

}  // namespace memtrace::test
