// 16 threads in an allocation storm, for attach and detach under MEMTRACE_START=dormant (check_dormant_storm.py).
// Usage: e2e_storm; commands on stdin, one a line:
//   quiesce  the threads stop (each after a whole alloc/free step) and the program prints what is live, one line
//            each: "live block ADDRESS SIZE" (PyTorch's blocks, through the fake libc10_cuda.so), "live cuda ADDRESS
//            SIZE" (its own cudaMalloc), then "reserved BYTES" (the fake caching allocator's segments on device 0,
//            which hold the blocks) and "quiet"
//   exit     everything is freed; "done", exit status 0
// It prints "storming" once every thread has allocated. Thread t (0..15): even t cudaMalloc (t + 1) x 4096 + (i % 4)
// x 512 bytes, odd t take a block of (t + 1) x 512 + (i % 4) x 512 bytes from the fake caching allocator; each
// keeps its last 8 allocations live and frees the oldest before the next, until quiesce. The steps come in bursts
// of 32 back to back, 10 ms apart: the threads collide as in a storm (at an attach too), and a trace of a few tenths
// of a second stays small enough for the checker's Python decoder.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "../../fakecuda/c10_cuda_allocator.h"

namespace {

constexpr int kThreads = 16;
constexpr int kKept = 8;

decltype(&fake_c10_cuda_malloc) g_block_malloc;
decltype(&fake_c10_cuda_free) g_block_free;
decltype(&fake_c10_cuda_stats) g_block_stats;
std::atomic<bool> g_stop{false};
std::atomic<int> g_started{0};

struct Live {
  void* address = nullptr;
  size_t size = 0;
};
Live g_live[kThreads][kKept];

bool uses_blocks(int thread) { return thread % 2 == 1; }

void* allocate(int thread, size_t size) {
  if (uses_blocks(thread)) return g_block_malloc(size, 0);
  void* p = nullptr;
  return cudaMalloc(&p, size) == cudaSuccess ? p : nullptr;
}

void release(int thread, void* p) {
  if (uses_blocks(thread)) g_block_free(p);
  else if (cudaFree(p) != cudaSuccess) std::exit(3);
}

void storm(int thread) {
  for (long i = 0; !g_stop.load(std::memory_order_relaxed); i++) {
    Live& slot = g_live[thread][i % kKept];
    if (slot.address) release(thread, slot.address);
    const size_t size = uses_blocks(thread) ? static_cast<size_t>(thread + 1) * 512 + (i % 4) * 512
                                            : static_cast<size_t>(thread + 1) * 4096 + (i % 4) * 512;
    slot = Live{allocate(thread, size), size};
    if (!slot.address) std::exit(4);
    if (i == kKept) g_started.fetch_add(1);
    if (i % 32 == 31) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

template <typename Fn>
Fn must_find(void* library, const char* name) {
  void* f = dlsym(library, name);
  if (!f) {
    std::fprintf(stderr, "dlsym(libc10_cuda.so, %s) failed\n", name);
    std::exit(2);
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace

int main() {
  void* c10_cuda = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!c10_cuda) {
    std::fprintf(stderr, "dlopen(libc10_cuda.so): %s\n", dlerror());
    return 2;
  }
  g_block_malloc = must_find<decltype(&fake_c10_cuda_malloc)>(c10_cuda, "fake_c10_cuda_malloc");
  g_block_free = must_find<decltype(&fake_c10_cuda_free)>(c10_cuda, "fake_c10_cuda_free");
  g_block_stats = must_find<decltype(&fake_c10_cuda_stats)>(c10_cuda, "fake_c10_cuda_stats");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) threads.emplace_back(storm, t);
  while (g_started.load() < kThreads) std::this_thread::yield();
  std::printf("storming\n");
  std::fflush(stdout);
  std::string command;
  while (std::getline(std::cin, command)) {
    if (command == "quiesce" && !g_stop.exchange(true)) {
      for (std::thread& t : threads) t.join();
      for (int t = 0; t < kThreads; t++)
        for (const Live& live : g_live[t])
          std::printf("live %s %llu %zu\n", uses_blocks(t) ? "block" : "cuda",
                      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(live.address)), live.size);
      std::printf("reserved %llu\nquiet\n", static_cast<unsigned long long>(g_block_stats(0).reserved_bytes));
      std::fflush(stdout);
    } else if (command == "exit") {
      g_stop.store(true);
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
      for (int t = 0; t < kThreads; t++)
        for (Live& live : g_live[t])
          if (live.address) release(t, live.address);
      std::printf("done\n");
      return 0;
    }
  }
  return 1;
}
