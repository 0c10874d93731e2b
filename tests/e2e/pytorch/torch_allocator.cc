// PyTorch's allocator layer: loads the fake libc10_cuda.so with dlopen(RTLD_LOCAL), as Python loads
// torch, and runs a known block sequence through its caching allocator (rules in
// tests/fakecuda/c10_cuda_allocator.h). Prints the allocator's own maxima and the hook call counters of
// libc10.so as JSON, so the checker can compare them with memtrace's figures.
// With the argument `oom` it runs the out-of-memory sequence instead (see run_oom_sequence).
#include <dlfcn.h>

#include <string_view>

#include "../../fakecuda/c10_cuda_allocator.h"
#include "../../fakecuda/c10_profiler_hooks.h"
#include "e2e_util.h"

template <typename Fn>
Fn must_find(void* handle, const char* name) {
  void* fn = dlsym(handle, name);
  if (!fn) {
    std::fprintf(stderr, "dlsym(libc10_cuda.so, %s) failed\n", name);
    std::exit(3);
  }
  return reinterpret_cast<Fn>(fn);
}

struct Allocator {
  decltype(&fake_c10_cuda_malloc) malloc_block;
  decltype(&fake_c10_cuda_free) free_block;
  decltype(&fake_c10_cuda_empty_cache) empty_cache;
};

void run_block_sequence(const Allocator& a) {
  void* b1 = a.malloc_block(1000, 0);      // 1024-byte block, new 2 MiB small segment
  void* b2 = a.malloc_block(3 * kMiB, 0);  // new 4 MiB large segment
  void* b3 = a.malloc_block(500000, 0);    // 500224-byte block from the small segment's tail: kept
  a.free_block(b2);
  void* b4 = a.malloc_block(3 * kMiB, 0);  // reuses b2's cached block
  void* b5 = a.malloc_block(5 * kMiB, 0);  // new 6 MiB segment: the peak
  a.free_block(b5);
  a.free_block(b4);
  a.empty_cache();                     // the 4 MiB and 6 MiB segments go back to cudaFree
  void* b6 = a.malloc_block(1000, 0);  // small segment's tail: kept
  a.free_block(b1);
  void* b7 = a.malloc_block(2048, 1);  // device 1: new 2 MiB small segment, kept cached
  a.free_block(b7);
  if (!b1 || !b2 || !b3 || !b4 || !b5 || !b6 || !b7) std::exit(3);
}

// One small block (a 2 MiB segment), then a 2 GiB request the 1 GiB device cannot hold: the segment's
// cudaMalloc fails and the allocator reports to c10::reportOutOfMemoryToProfiler.
void run_oom_sequence(const Allocator& a) {
  if (!a.malloc_block(1000, 0)) std::exit(3);
  if (a.malloc_block(size_t{2} << 30, 0)) std::exit(3);
}

int main(int argc, char** argv) {
  bool oom = argc > 1 && std::string_view(argv[1]) == "oom";
  void* c10_cuda = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!c10_cuda) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 3;
  }
  Allocator allocator{must_find<decltype(&fake_c10_cuda_malloc)>(c10_cuda, "fake_c10_cuda_malloc"),
                      must_find<decltype(&fake_c10_cuda_free)>(c10_cuda, "fake_c10_cuda_free"),
                      must_find<decltype(&fake_c10_cuda_empty_cache)>(c10_cuda, "fake_c10_cuda_empty_cache")};
  auto stats = must_find<decltype(&fake_c10_cuda_stats)>(c10_cuda, "fake_c10_cuda_stats");
  auto counters = must_find<decltype(&fake_c10_counters)>(c10_cuda, "fake_c10_counters");  // from libc10.so

  if (oom) run_oom_sequence(allocator);
  else run_block_sequence(allocator);

  FakeC10Counters c = counters();
  std::printf("{\"memory_usage_calls\": %llu, \"out_of_memory_calls\": %llu, \"net_alloc_bytes\": %lld",
              static_cast<unsigned long long>(c.memory_usage_calls),
              static_cast<unsigned long long>(c.out_of_memory_calls), static_cast<long long>(c.net_alloc_bytes));
  for (int device = 0; device < 2; ++device) {
    FakeAllocatorStats s = stats(device);
    std::printf(
        ", \"device%d\": {\"allocated_bytes\": %llu, \"reserved_bytes\": %llu, "
        "\"max_allocated_bytes\": %llu, \"max_reserved_bytes\": %llu}",
        device, static_cast<unsigned long long>(s.allocated_bytes), static_cast<unsigned long long>(s.reserved_bytes),
        static_cast<unsigned long long>(s.max_allocated_bytes), static_cast<unsigned long long>(s.max_reserved_bytes));
  }
  std::printf("}\n");
  return 0;
}
