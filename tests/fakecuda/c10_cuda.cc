// The fake libc10_cuda.so: see c10_cuda_allocator.h for the allocation rules.
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "c10_cuda_allocator.h"
#include "c10_profiler_hooks.h"

namespace {

constexpr size_t kBlockRoundingBytes = 512;
constexpr size_t kSmallBlockLimitBytes = 1u << 20;  // 1 MiB
constexpr size_t kSegmentRoundingBytes = 2u << 20;  // 2 MiB, also the small segment size

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

struct Segment {
  int device;
  bool small;
  char* base;
  size_t size;
  size_t used_bytes = 0;  // bump offset: everything below it has been carved into blocks
  size_t live_blocks = 0;
};

struct Block {
  Segment* segment;
  size_t size;
};

struct DeviceState {
  FakeAllocatorStats stats{};
  std::vector<std::unique_ptr<Segment>> segments;
  std::multimap<size_t, std::pair<char*, Segment*>> cached;  // free blocks by size
};

struct Allocator {
  std::mutex lock;
  std::map<int, DeviceState> devices;
  std::map<void*, Block> live;
};

Allocator& allocator() {
  static Allocator* a = new Allocator();
  return *a;
}

c10::Device cuda_device(int index) { return c10::Device{c10::DeviceType::CUDA, static_cast<int8_t>(index)}; }

char* take_cached(DeviceState& d, size_t size, bool small, Segment** segment) {
  auto range = d.cached.equal_range(size);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.second->small != small) continue;
    char* ptr = it->second.first;
    *segment = it->second.second;
    d.cached.erase(it);
    return ptr;
  }
  return nullptr;
}

char* take_tail(DeviceState& d, size_t size, bool small, Segment** segment) {
  for (auto& s : d.segments) {
    if (s->small != small || s->size - s->used_bytes < size) continue;
    char* ptr = s->base + s->used_bytes;
    s->used_bytes += size;
    *segment = s.get();
    return ptr;
  }
  return nullptr;
}

char* take_new_segment(DeviceState& d, int device, size_t size, bool small, Segment** segment) {
  size_t segment_size = small ? kSegmentRoundingBytes : round_up(size, kSegmentRoundingBytes);
  void* base = nullptr;
  if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&base, segment_size) != cudaSuccess) return nullptr;
  d.segments.push_back(std::make_unique<Segment>(Segment{device, small, static_cast<char*>(base), segment_size}));
  d.stats.reserved_bytes += segment_size;
  if (d.stats.reserved_bytes > d.stats.max_reserved_bytes) d.stats.max_reserved_bytes = d.stats.reserved_bytes;
  Segment* s = d.segments.back().get();
  s->used_bytes = size;
  *segment = s;
  return s->base;
}

}  // namespace

extern "C" {

void* fake_c10_cuda_malloc(size_t size, int device) {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> guard(a.lock);
  DeviceState& d = a.devices[device];
  size_t block_size = round_up(size == 0 ? 1 : size, kBlockRoundingBytes);
  bool small = block_size <= kSmallBlockLimitBytes;
  Segment* segment = nullptr;
  char* ptr = take_cached(d, block_size, small, &segment);
  if (!ptr) ptr = take_tail(d, block_size, small, &segment);
  if (!ptr) ptr = take_new_segment(d, device, block_size, small, &segment);
  if (!ptr) {
    c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(block_size), d.stats.allocated_bytes, d.stats.reserved_bytes,
                                     cuda_device(device));
    return nullptr;
  }
  segment->live_blocks++;
  a.live[ptr] = Block{segment, block_size};
  d.stats.allocated_bytes += block_size;
  if (d.stats.allocated_bytes > d.stats.max_allocated_bytes) d.stats.max_allocated_bytes = d.stats.allocated_bytes;
  c10::reportMemoryUsageToProfiler(ptr, static_cast<int64_t>(block_size), d.stats.allocated_bytes,
                                   d.stats.reserved_bytes, cuda_device(device));
  return ptr;
}

void fake_c10_cuda_free(void* ptr) {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> guard(a.lock);
  auto it = a.live.find(ptr);
  if (it == a.live.end()) return;
  Block block = it->second;
  a.live.erase(it);
  DeviceState& d = a.devices[block.segment->device];
  block.segment->live_blocks--;
  d.cached.emplace(block.size, std::make_pair(static_cast<char*>(ptr), block.segment));
  d.stats.allocated_bytes -= block.size;
  c10::reportMemoryUsageToProfiler(ptr, -static_cast<int64_t>(block.size), d.stats.allocated_bytes,
                                   d.stats.reserved_bytes, cuda_device(block.segment->device));
}

void fake_c10_cuda_empty_cache() {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> guard(a.lock);
  for (auto& [device, d] : a.devices) {
    for (auto it = d.segments.begin(); it != d.segments.end();) {
      Segment* s = it->get();
      if (s->live_blocks != 0) {
        ++it;
        continue;
      }
      for (auto c = d.cached.begin(); c != d.cached.end();) c = c->second.second == s ? d.cached.erase(c) : ++c;
      cudaSetDevice(device);
      cudaFree(s->base);
      d.stats.reserved_bytes -= s->size;
      it = d.segments.erase(it);
    }
  }
}

FakeAllocatorStats fake_c10_cuda_stats(int device) {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> guard(a.lock);
  return a.devices[device].stats;
}

}  // extern "C"
