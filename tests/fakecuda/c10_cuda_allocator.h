// The C entry points of the fake libc10_cuda.so, looked up with dlsym by test programs that load it
// with dlopen(RTLD_LOCAL), the way Python loads torch.
//
// A tiny caching allocator in PyTorch's manner: segments come from cudaMalloc, blocks are carved from
// them and cached after free, and every block allocation (+size) and free (-size) is reported to
// c10::reportMemoryUsageToProfiler with the device's running allocated and reserved totals. Rules, so
// that tests can work out every number by hand:
//   - a request is rounded up to a multiple of 512 bytes (the block size);
//   - blocks of at most 1 MiB are "small" and come from 2 MiB segments; larger ones come from segments
//     of the block size rounded up to 2 MiB;
//   - a request first reuses a cached free block of exactly the block size (same device, same kind),
//     then takes the free tail of a segment of the same kind with room, then gets a new segment;
//   - fake_c10_cuda_empty_cache returns every segment with no live block to cudaFree (no report: PyTorch
//     reports only block events);
//   - when cudaMalloc fails the allocator calls c10::reportOutOfMemoryToProfiler and returns nullptr.
#pragma once
#include <cstddef>
#include <cstdint>

extern "C" {

struct FakeAllocatorStats {
  uint64_t allocated_bytes;      // live blocks
  uint64_t reserved_bytes;       // live segments
  uint64_t max_allocated_bytes;  // what torch.cuda.max_memory_allocated() would say
  uint64_t max_reserved_bytes;   // what torch.cuda.max_memory_reserved() would say
};

void* fake_c10_cuda_malloc(size_t size, int device);
void fake_c10_cuda_free(void* ptr);
void fake_c10_cuda_empty_cache();
FakeAllocatorStats fake_c10_cuda_stats(int device);
}
