// fork() while other threads allocate: the children must not inherit a lock held mid-update.
// Usage: e2e_fork_threads PAIRS CHILDREN
// Four threads each do PAIRS x (cudaMalloc 1 MiB, cudaFree) while the main thread forks CHILDREN
// children one after the other; each child does cudaMalloc 2 MiB + cudaFree and exit(0), and the
// main thread waits for it before the next fork. The main thread itself never allocates.
// Parent's events: 4 threads x PAIRS x 2; each child's: 2.
// A deadlock in a child hangs the main thread's waitpid: the checker's timeout turns that into a failure.
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "e2e_util.h"

namespace {

std::atomic<int> g_threads_done{0};

void allocate_pairs(int pairs) {
  for (int i = 0; i < pairs; i++) {
    void* p = nullptr;
    if (cudaMalloc(&p, kMiB) != cudaSuccess || cudaFree(p) != cudaSuccess) std::exit(3);
  }
  g_threads_done++;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  int pairs = std::atoi(argv[1]);
  int children = std::atoi(argv[2]);
  // The test double's runtime loads its driver lazily behind a function-local static; a fork while a
  // worker is inside that first initialization leaves the child waiting on the guard forever (a hazard of
  // the double, not of the tracer). One runtime call that allocates nothing settles it before any fork.
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) return 3;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) threads.emplace_back(allocate_pairs, pairs);
  int forks_while_running = 0;
  for (int c = 0; c < children; c++) {
    if (g_threads_done.load() < 4) forks_while_running++;
    pid_t pid = fork();
    if (pid == 0) {
      void* p = nullptr;
      if (cudaMalloc(&p, 2 * kMiB) != cudaSuccess || cudaFree(p) != cudaSuccess) _exit(3);
      std::exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("child %d failed (status %#x)\n", pid, status);
      return 4;
    }
  }
  for (std::thread& t : threads) t.join();
  std::printf("%d children, %d forked while the threads were allocating\n", children, forks_while_running);
  return 0;
}
