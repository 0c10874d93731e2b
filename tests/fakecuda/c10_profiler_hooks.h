// The two PyTorch profiler hooks that libc10_cuda.so calls (exported by libc10.so), with the exact C++
// signatures of torch 2.x so that the mangled names are the real ones:
//   _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE
//   _ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE
// c10::Device is two int8_t fields passed by value (c10/core/Device.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace c10 {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type_;
  int8_t index_;
};

// Called on every block allocation (alloc_size > 0) and free (alloc_size < 0) of the caching allocator
// with the allocator's own totals after the change, in bytes.
void reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size, size_t total_allocated, size_t total_reserved,
                                 Device device);
// Called when the caching allocator cannot get memory for a request of alloc_size bytes.
void reportOutOfMemoryToProfiler(int64_t alloc_size, size_t total_allocated, size_t total_reserved, Device device);

}  // namespace c10

// Test-visible record of the hook calls that reached libc10.so.
extern "C" {
struct FakeC10Counters {
  uint64_t memory_usage_calls;
  uint64_t out_of_memory_calls;
  int64_t net_alloc_bytes;  // sum of alloc_size over all memory-usage calls
};
FakeC10Counters fake_c10_counters();
}
