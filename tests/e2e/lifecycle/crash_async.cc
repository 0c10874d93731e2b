// A fatal signal that arrives at any moment, possibly while the receiving thread is inside the tracer
// (holding its lock) and while other threads are recording.
// Four threads allocate and free 1 MiB in a loop; once each has done 1000 pairs, the main thread sends
// SIGABRT to thread 0 with pthread_kill. No handler of the program's own: the process must die by SIGABRT,
// whatever the tracer was doing at that moment. Prints nothing after the threads start.
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "e2e_util.h"

namespace {

constexpr int kThreads = 4;
std::atomic<long> g_pairs[kThreads];

void* allocate_forever(void* arg) {
  auto* pairs = static_cast<std::atomic<long>*>(arg);
  for (;;) {
    void* p = nullptr;
    if (cudaMalloc(&p, kMiB) != cudaSuccess || cudaFree(p) != cudaSuccess) std::exit(3);
    pairs->fetch_add(1);
  }
  return nullptr;
}

}  // namespace

int main() {
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; t++)
    if (pthread_create(&threads[t], nullptr, allocate_forever, &g_pairs[t]) != 0) return 4;
  for (int t = 0; t < kThreads; t++)
    while (g_pairs[t].load() < 1000) usleep(1000);
  pthread_kill(threads[0], SIGABRT);
  for (;;) pause();
}
