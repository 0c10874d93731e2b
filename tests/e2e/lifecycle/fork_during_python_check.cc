// fork() while another thread starting the trace is inside the tracer's Python check (python_frames_init), which
// holds the check's lock: the child must not inherit that lock held by a thread it does not have (its own start
// makes the same check and would wait forever: e2e_fork_threads' rare hang). The tracer's fork handler waits for
// the check to end and holds its lock across fork().
// The program exports Py_IsInitialized, so the check takes it for a CPython older than 3.11 and asks dladdr which
// file it is in; the program defines dladdr too (the executable comes first in the symbol search order). The
// worker thread's dladdr of Py_IsInitialized lets the main thread fork and sleeps 300 ms, inside the check; without the
// handler's wait the fork lands in those 300 ms.
// Sequence: a worker allocates 4 MiB (its start of tracing makes the check: the main thread forks now); the
// child allocates 2 MiB, frees it, exit(0); the main thread waits for the child (at most 10 s: a child stuck on
// the inherited lock is killed and reported); the worker frees its 4 MiB; the program exits 0 when the child
// exited 0 (else 5).
// Events: parent: alloc 4 MiB, free 4 MiB; child: alloc 2 MiB, free 2 MiB (and in each trace a notice that
// this "CPython" has no frame reader).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "e2e_util.h"
#include "fork_child_wait.h"

namespace {

std::atomic<bool> g_held{false};  // the worker is inside the check: fork now
thread_local bool t_is_worker = false;

void worker() {
  t_is_worker = true;
  void* p;
  E2E_OK(cudaMalloc(&p, 4 * kMiB));
  E2E_OK(cudaFree(p));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int Py_IsInitialized() { return 0; }

extern "C" __attribute__((visibility("default"))) int dladdr(const void* address, Dl_info* info) {
  using Fn = int (*)(const void*, Dl_info*);
  static const Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dladdr"));
  // Only the check's own call: other dladdr calls (the tracer's symbol resolver's) come earlier, some while the
  // test double's runtime is still initializing, which a fork must not interrupt either (fork_threads.cc).
  if (t_is_worker && address == reinterpret_cast<const void*>(&Py_IsInitialized) && !g_held.exchange(true))
    usleep(300 * 1000);
  return next(address, info);
}

int main() {
  std::thread allocating(worker);
  for (int waited_ms = 0; !g_held.load(); waited_ms++) {
    if (waited_ms == 10000) {
      std::printf("no thread made the Python check within 10 s: the tracer starts differently now\n");
      std::_Exit(6);
    }
    usleep(1000);
  }
  usleep(20 * 1000);  // well inside the worker's 300 ms
  int child_status = fork_allocating_child_and_wait();
  std::printf("child exit status %d\n", child_status);
  allocating.join();
  return child_status == 0 ? 0 : 5;
}
