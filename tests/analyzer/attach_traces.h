// Traces that began by attach (proto TraceStart.origin), shared by the attach tests of the model, the reports
// and the exports. Every figure is in the comment above its builder, worked out by hand.
#pragma once

#include "analysis_trace.h"
#include "trace_builder.h"

namespace memtrace::test {

// 2026-12-02 15:04:05 UTC, the moment of attach (TraceStart.start_unix_ns).
inline constexpr uint64_t kAttachUnixNs = 1'796'223'845'000'000'000;

// Attached by injection (attach 2, driver and PyTorch layers), device 0. Live at attach:
//   segment S 8 MiB at 0x10000000 (LAYER_DRIVER, cudaMalloc), PyTorch blocks A 1 MiB at 0x10000000 and
//   B 2 MiB at 0x10100000 (LAYER_BLOCK, TORCH_ALLOCATOR): allocated 3 MiB, driver 8 MiB;
//   AttachBaseline: allocated 3 MiB, reserved 8 MiB (torch.cuda.memory_*() at attach), free 70 of 80 MiB.
//   e0  1 ms  free A         allocated 2 MiB, reserved 8 MiB   (a pre-attach block: matched, not unknown)
//   e1  2 ms  block C 1 MiB  allocated 3 MiB, reserved 8 MiB   (stack 10)
//   TraceEnd DETACH at 3 ms.
// Peak allocated 3 MiB at attach (time 0, event 0); live at the end: B (before attach) and C (stack 10).
inline TraceBuilder attached_torch_trace(int64_t baseline_allocated_bytes = 3 * kMiB) {
  constexpr int64_t ms = 1'000'000;
  TraceBuilder b(3);
  b.attach_start(proto::TraceStart::ATTACH_INJECTED, 2, true, true, 1'000'000'000, kAttachUnixNs);
  b.python_frame(1, "train.py", "train_step", 42).stack(10, {kPy | 1});
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x10000000, 8 * kMiB);
  b.torch_block_at_attach(0, 0x10000000, kMiB).torch_block_at_attach(0, 0x10100000, 2 * kMiB);
  b.attach_baseline(0, 70 * kMiB, 80 * kMiB, baseline_allocated_bytes, 8 * kMiB).end_chunk();
  b.event(torch_event(proto::FREE, 0, 0x10000000, kMiB, 2 * kMiB, 8 * kMiB, ms));
  b.event(torch_event(proto::ALLOC, 0, 0x10300000, kMiB, 3 * kMiB, 8 * kMiB, ms, 10));
  b.end(2, ms, proto::TraceEnd::DETACH).end_chunk();
  return b;
}

// Attached to a dormant tracer (attach 1), device 0, PyTorch's cudaMallocAsync backend: its blocks are not
// listed, only their total: an aggregate of 3 MiB of PyTorch blocks (blocks_unknown), baseline reserved 4 MiB.
//   e0..e3  frees of four blocks never seen, 1 MiB each, 1 ms apart: the first three are taken from the aggregate
//           (allocated 2, 1, 0 MiB), the fourth is an unknown free (PyTorch's total stays 0).
//   e4      block D 512 KiB at 0x20000000, allocated 512 KiB, reserved 4 MiB (stack 0)
// No TraceEnd (cut off).
inline TraceBuilder attached_unlisted_blocks_trace() {
  constexpr int64_t ms = 1'000'000;
  TraceBuilder b(3);
  b.attach_start(proto::TraceStart::ATTACH_DORMANT, 1, true, true, 1'000'000'000, kAttachUnixNs);
  b.live_at_attach(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 0, 0, 3 * kMiB, /*blocks_unknown=*/true);
  b.attach_baseline(0, 70 * kMiB, 80 * kMiB, 3 * kMiB, 4 * kMiB).end_chunk();
  for (uint64_t i = 0; i < 4; ++i) {
    uint64_t allocated = i < 3 ? (2 - i) * kMiB : 0;
    b.event(torch_event(proto::FREE, 0, 0x30000000 + i * kMiB, kMiB, allocated, 4 * kMiB, ms));
  }
  b.event(torch_event(proto::ALLOC, 0, 0x20000000, kMiB / 2, kMiB / 2, 4 * kMiB, ms));
  b.end_chunk();
  return b;
}

// `memtrace snapshot PID` of a dormant process: the live set once, then TraceEnd SNAPSHOT_DONE, no events.
// Device 0: segment 4 MiB at 0x40000000, blocks 1 MiB + 1 MiB in it; device 1: a cudaMalloc of 6 MiB (driver
// level only). Baseline of device 0: allocated 2 MiB, reserved 4 MiB.
inline TraceBuilder snapshot_trace() {
  TraceBuilder b(3);
  b.attach_start(proto::TraceStart::SNAPSHOT, 1, true, true, 1'000'000'000, kAttachUnixNs);
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0x40000000, 4 * kMiB);
  b.torch_block_at_attach(0, 0x40000000, kMiB).torch_block_at_attach(0, 0x40100000, kMiB);
  b.live_at_attach(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 1, 0x50000000, 6 * kMiB);
  b.attach_baseline(0, 70 * kMiB, 80 * kMiB, 2 * kMiB, 4 * kMiB);
  b.end(0, 0, proto::TraceEnd::SNAPSHOT_DONE).end_chunk();
  return b;
}

}  // namespace memtrace::test
