// The workloads of bench/trace_size: allocation patterns run through the fake PyTorch caching allocator
// (tests/fakecuda's libc10_cuda.so, loaded with dlopen(RTLD_LOCAL) as Python loads torch), so that every
// block is reported to c10::reportMemoryUsageToProfiler the way PyTorch reports it, and memtrace records
// it with its native stack.
//
//   trace_size_workload loop STEPS [GAP_NS]
//                                       a training loop: each step makes the same 25 allocations from the
//                                       same 25 call sites with the same sizes and frees them in reverse
//                                       order (50 block events a step); the cached blocks are reused, so
//                                       the addresses repeat as under PyTorch. GAP_NS (default 0) is CPU
//                                       work spun between block events, as the kernel launches between a
//                                       real loop's allocations: it gives the event times a real loop's
//                                       spread (time deltas are most of an event's compressed bytes).
//   trace_size_workload random EVENTS   random sizes (log-uniform 512 B .. 64 MiB), random call site among
//                                       50 at a random extra depth of 0..31 frames, random free order
//                                       (a live set of at most 128 blocks); seeded, so every run is the same.
//                                       Every 1000 events the cache is emptied (segments with no live block
//                                       go back to cudaFree), as PyTorch does before it gives up on a
//                                       request: random sizes rarely reuse a cached block.
// Prints the number of block events it made (allocations + frees) on stdout.
#include <dlfcn.h>
#include <time.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "../tests/fakecuda/c10_cuda_allocator.h"

namespace {

using MallocBlock = void* (*)(size_t, int);
using FreeBlock = void (*)(void*);
using EmptyCache = void (*)();
MallocBlock g_malloc_block;
FreeBlock g_free_block;
EmptyCache g_empty_cache;

// Recurses `depth` more frames before allocating, so that call sites differ in stack depth.
[[gnu::noinline]] void* allocate_at_depth(int depth, size_t size) {
  if (depth > 0) {
    void* p = allocate_at_depth(depth - 1, size);
    asm volatile("" ::: "memory");  // keeps the call a call, not a tail jump
    return p;
  }
  return g_malloc_block(size, 0);
}

// One distinct call site per N: a different return address on every recorded stack.
template <int N>
[[gnu::noinline]] void* call_site(int depth, size_t size) {
  void* p = allocate_at_depth(depth, size);
  asm volatile("" ::: "memory");
  return p;
}

constexpr int kCallSites = 50;
using CallSite = void* (*)(int, size_t);
template <int... N>
constexpr std::array<CallSite, sizeof...(N)> make_call_sites(std::integer_sequence<int, N...>) {
  return {&call_site<N>...};
}
constexpr auto kSites = make_call_sites(std::make_integer_sequence<int, kCallSites>{});

// A step of a training loop: 25 tensors of a transformer-like layer stack (sizes in bytes), made in
// order and freed in reverse, like activations saved by the forward pass and released by the backward.
constexpr size_t kStepSizes[25] = {4 << 20,  12 << 20, 4 << 20,  16 << 20, 4 << 20, 2048,      4 << 20,
                                   12 << 20, 4 << 20,  16 << 20, 4 << 20,  2048,    4 << 20,   12 << 20,
                                   4 << 20,  16 << 20, 4 << 20,  2048,     8 << 20, 50257 * 4, 512,
                                   3 << 20,  1 << 20,  768 * 4,  768 * 4};

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

void spin(uint64_t gap_ns) {
  if (gap_ns == 0) return;
  uint64_t until = monotonic_ns() + gap_ns;
  while (monotonic_ns() < until) {
  }
}

uint64_t run_loop(long steps, uint64_t gap_ns) {
  uint64_t events = 0;
  void* live[25];
  for (long s = 0; s < steps; s++) {
    for (int i = 0; i < 25; i++) {
      live[i] = kSites[i](2, kStepSizes[i]);
      spin(gap_ns);
    }
    for (int i = 24; i >= 0; i--) {
      g_free_block(live[i]);
      spin(gap_ns);
    }
    events += 50;
  }
  return events;
}

uint64_t run_random(long target_events) {
  std::mt19937_64 rng(20261129);
  std::uniform_real_distribution<double> log2_size(9.0, 26.0);  // 512 B .. 64 MiB
  std::uniform_int_distribution<int> site(0, kCallSites - 1);
  std::uniform_int_distribution<int> depth(0, 31);
  std::vector<void*> live;
  uint64_t events = 0;
  while (events < static_cast<uint64_t>(target_events)) {
    if (events % 1000 == 999) g_empty_cache();
    bool allocate = live.empty() || (live.size() < 128 && (rng() & 1));
    if (allocate) {
      size_t size = static_cast<size_t>(std::exp2(log2_size(rng)));
      void* p = kSites[site(rng)](depth(rng), size);
      if (!p) {
        std::fprintf(stderr, "trace_size_workload: allocation of %zu bytes failed\n", size);
        std::exit(3);
      }
      live.push_back(p);
    } else {
      size_t i = rng() % live.size();
      g_free_block(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    events++;
  }
  for (void* p : live) g_free_block(p);
  return events + live.size();
}

void* must_find(void* handle, const char* name) {
  void* fn = dlsym(handle, name);
  if (!fn) {
    std::fprintf(stderr, "trace_size_workload: dlsym(libc10_cuda.so, %s) failed\n", name);
    std::exit(3);
  }
  return fn;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view mode = argc >= 3 ? argv[1] : "";
  long count = argc >= 3 ? std::strtol(argv[2], nullptr, 10) : 0;
  long gap_ns = argc == 4 && mode == "loop" ? std::strtol(argv[3], nullptr, 10) : 0;
  if ((mode != "loop" && mode != "random") || count <= 0 || gap_ns < 0 || argc > (mode == "loop" ? 4 : 3)) {
    std::fprintf(stderr, "usage: trace_size_workload loop STEPS [GAP_NS] | random EVENTS\n");
    return 2;
  }
  void* c10_cuda = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!c10_cuda) {
    std::fprintf(stderr, "trace_size_workload: %s\n", dlerror());
    return 3;
  }
  g_malloc_block = reinterpret_cast<MallocBlock>(must_find(c10_cuda, "fake_c10_cuda_malloc"));
  g_free_block = reinterpret_cast<FreeBlock>(must_find(c10_cuda, "fake_c10_cuda_free"));
  g_empty_cache = reinterpret_cast<EmptyCache>(must_find(c10_cuda, "fake_c10_cuda_empty_cache"));
  uint64_t events = mode == "loop" ? run_loop(count, static_cast<uint64_t>(gap_ns)) : run_random(count);
  std::printf("%llu\n", static_cast<unsigned long long>(events));
  return 0;
}
