// Event constructors for the `memtrace oom` tests: failed allocations and the DEVICE_USAGE samples the
// tracer takes around them (proto/memtrace.proto).
#pragma once

#include <optional>

#include "trace_builder.h"

namespace memtrace::test::oom {

inline constexpr uint64_t kMiB = 1 << 20;
inline constexpr int64_t kSecond = 1'000'000'000;

// A failed allocation of `size` bytes with cuMemGetInfo's free/total at the failure.
inline proto::Event oom_event(proto::Layer layer, proto::Api api, int32_t device, uint64_t size, uint64_t free_bytes,
                              uint64_t total_bytes, int64_t delta_ns = 0, uint64_t stack_id = 0, uint32_t tid = 1) {
  proto::Event e = make_event(proto::OOM, layer, api, device, 0, size, delta_ns, stack_id);
  e.set_device_free_bytes(free_bytes);
  e.set_device_total_bytes(total_bytes);
  e.set_result(2);  // cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY
  e.set_tid(tid);
  return e;
}

// The failed cudaMalloc of a driver-level OOM.
inline proto::Event cuda_malloc_oom(int32_t device, uint64_t size, uint64_t free_bytes, uint64_t total_bytes,
                                    int64_t delta_ns = 0, uint64_t stack_id = 0, uint32_t tid = 1) {
  return oom_event(proto::LAYER_DRIVER, proto::CUDA_MALLOC, device, size, free_bytes, total_bytes, delta_ns, stack_id,
                   tid);
}

// PyTorch's reportOutOfMemoryToProfiler, with the allocator's totals at the failure.
inline proto::Event torch_oom(int32_t device, uint64_t size, uint64_t free_bytes, uint64_t total_bytes,
                              uint64_t allocated_total, uint64_t reserved_total, int64_t delta_ns = 0,
                              uint64_t stack_id = 0, uint32_t tid = 1) {
  proto::Event e = oom_event(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, device, size, free_bytes, total_bytes,
                             delta_ns, stack_id, tid);
  e.set_allocator_allocated_bytes(allocated_total);
  e.set_allocator_reserved_bytes(reserved_total);
  return e;
}

// A DEVICE_USAGE sample: `api` NVML_SAMPLE from the writer thread, or the failed call's api right after an OOM.
inline proto::Event device_usage(proto::Api api, int32_t device, uint64_t free_bytes, uint64_t total_bytes,
                                 std::optional<uint64_t> process_used, std::optional<uint64_t> others_used,
                                 int64_t delta_ns = 0, uint32_t tid = 1) {
  proto::Event e = make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, api, device, 0, 0, delta_ns);
  e.set_device_free_bytes(free_bytes);
  e.set_device_total_bytes(total_bytes);
  if (process_used) e.set_process_used_bytes(*process_used);
  if (others_used) e.set_other_processes_used_bytes(*others_used);
  e.set_tid(tid);
  return e;
}

inline proto::Event with_tid(proto::Event e, uint32_t tid) {
  e.set_tid(tid);
  return e;
}

}  // namespace memtrace::test::oom
