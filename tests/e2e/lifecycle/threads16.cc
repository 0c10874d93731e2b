// 16 threads allocate and free at once. Usage: e2e_threads16 PAIRS
// Thread t (0..15) does PAIRS x (cudaMalloc (t + 1) MiB, cudaFree), all threads released together.
// Events: 16 x PAIRS x 2, each thread's with its own thread id and its own size. The main thread does not
// allocate. A deadlock hangs the joins: the checker's timeout turns that into a failure.
#include <cuda_runtime_api.h>
#include <pthread.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "e2e_util.h"

namespace {

constexpr int kThreads = 16;
pthread_barrier_t g_start;

void allocate_pairs(int thread, int pairs) {
  pthread_barrier_wait(&g_start);
  size_t size = static_cast<size_t>(thread + 1) * kMiB;
  for (int i = 0; i < pairs; i++) {
    void* p = nullptr;
    if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) std::exit(3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  int pairs = std::atoi(argv[1]);
  pthread_barrier_init(&g_start, nullptr, kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) threads.emplace_back(allocate_pairs, t, pairs);
  for (std::thread& t : threads) t.join();
  std::printf("%d threads x %d pairs done\n", kThreads, pairs);
  return 0;
}
