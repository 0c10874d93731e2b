// fork() while another thread's stack capture is inside the loader's dl_iterate_phdr, which holds the
// loader's write lock (dl_load_write_lock) while it runs. glibc does not reset that lock in a forked child, so
// a child forked at that moment waits forever in its first dl_iterate_phdr (the tracer's, to find its own
// code or to look up unwind tables; libgcc's, to throw an exception). The tracer's fork handler waits for the
// unwinds in flight to end before fork() goes on, and holds new ones back until it returns.
// The program defines dl_iterate_phdr, which libunwind calls on an unwind-cache miss (a thread's first
// unwind); the executable comes first in the symbol search order. The worker thread's first call runs the
// real one with a callback that, at its first module, lets the main thread fork and sleeps 300 ms: inside
// the lock. Without the handler's wait the fork lands in those 300 ms.
// Sequence: the main thread allocates 1 MiB and frees it (the trace starts); a worker allocates 4 MiB (the
// main thread forks during the worker's unwind); the child allocates 2 MiB, frees it, exit(0); the main
// thread waits for the child (at most 10 s: a child stuck on the inherited lock is killed and reported); the
// worker frees its 4 MiB; the program exits 0 when the child exited 0 (else 5).
// Events: parent: alloc 1 MiB, free 1 MiB, alloc 4 MiB, free 4 MiB; child: alloc 2 MiB, free 2 MiB.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "e2e_util.h"
#include "fork_child_wait.h"

namespace {

using Callback = int (*)(dl_phdr_info*, size_t, void*);
std::atomic<bool> g_armed{false};      // the worker's next dl_iterate_phdr is the one to hold
std::atomic<bool> g_lock_held{false};  // the worker is inside it: fork now
thread_local bool t_is_worker = false;

struct Forwarded {
  Callback callback;
  void* data;
  bool first;
};

int hold_then_forward(dl_phdr_info* info, size_t size, void* data) {
  auto* forwarded = static_cast<Forwarded*>(data);
  if (forwarded->first) {
    forwarded->first = false;
    g_lock_held = true;
    usleep(300 * 1000);
  }
  return forwarded->callback(info, size, forwarded->data);
}

void worker() {
  t_is_worker = true;
  g_armed = true;
  void* p;
  E2E_OK(cudaMalloc(&p, 4 * kMiB));
  E2E_OK(cudaFree(p));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int dl_iterate_phdr(Callback callback, void* data) {
  using Fn = int (*)(Callback, void*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dl_iterate_phdr"));
  if (!t_is_worker || !g_armed.exchange(false)) return real(callback, data);
  Forwarded forwarded{callback, data, true};
  return real(hold_then_forward, &forwarded);
}

int main() {
  void* p;
  E2E_OK(cudaMalloc(&p, kMiB));
  E2E_OK(cudaFree(p));
  std::thread allocating(worker);
  for (int waited_ms = 0; !g_lock_held.load(); waited_ms++) {
    if (waited_ms == 10000) {
      std::printf("the worker called no dl_iterate_phdr within 10 s: the tracer unwinds differently now\n");
      std::_Exit(6);
    }
    usleep(1000);
  }
  int child_status = fork_allocating_child_and_wait();
  std::printf("child exit status %d\n", child_status);
  allocating.join();
  return child_status == 0 ? 0 : 5;
}
