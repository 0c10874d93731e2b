// fork() at the worst moment: while another thread is inside the tracer's start (the first event of the
// process: settings, file, writer thread), where the tracer holds its start lock.
// The program defines gethostname(), which the tracer calls while it starts; the executable comes first
// in the symbol search order, so the tracer's call lands here. When a thread other than the main thread
// calls it for the first time, it lets the main thread fork and waits until the child has ended.
// Sequence: a worker thread allocates 4 MiB (its start of tracing calls gethostname: the main thread
// forks now); the child allocates 2 MiB, frees it, exit(0); the main thread waits for the child (at most
// 10 s: a child stuck on a lock inherited from the worker is killed and reported), then the worker goes
// on, frees its 4 MiB, and the program exits 0 when the child exited 0 (else 5).
// Events: parent: alloc 4 MiB, free 4 MiB; child: alloc 2 MiB, free 2 MiB.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "e2e_util.h"
#include "fork_child_wait.h"

namespace {

std::atomic<int> g_step{0};  // 1: a worker is inside the tracer's start; 2: the child has ended
std::atomic<int> g_child_result{-1};

bool on_main_thread() { return syscall(SYS_gettid) == getpid(); }

void worker() {
  void* p;
  E2E_OK(cudaMalloc(&p, 4 * kMiB));
  E2E_OK(cudaFree(p));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int gethostname(char* name, size_t length) {
  using Fn = int (*)(char*, size_t);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "gethostname"));
  int expected = 0;
  if (!on_main_thread() && g_step.compare_exchange_strong(expected, 1))
    while (g_step.load() != 2) usleep(1000);
  return real(name, length);
}

int main() {
  std::thread allocating(worker);
  for (int waited_ms = 0; g_step.load() != 1; waited_ms++) {
    if (waited_ms == 10000) {
      std::printf("no thread called gethostname within 10 s: the tracer starts differently now\n");
      std::_Exit(6);
    }
    usleep(1000);
  }
  int child_status = fork_allocating_child_and_wait();
  std::printf("child exit status %d\n", child_status);
  g_step = 2;
  allocating.join();
  return child_status == 0 ? 0 : 5;
}
