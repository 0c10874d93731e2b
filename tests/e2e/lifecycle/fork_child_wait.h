// The child of the fork tests that fork at a chosen moment (fork_during_start.cc, fork_during_unwind.cc): it
// allocates 2 MiB, frees it and exits 0; the parent waits for it at most 10 s, and a child stuck on a lock it
// inherited (the test's failure) is killed and reported.
#pragma once
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "e2e_util.h"

// Forks that child and returns its exit status: 124 when it was killed after 10 s, 128 when a signal ended it.
inline int fork_allocating_child_and_wait() {
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    void* p;
    if (cudaMalloc(&p, 2 * kMiB) != cudaSuccess || cudaFree(p) != cudaSuccess) _exit(3);
    std::exit(0);
  }
  for (int i = 0; i < 10000; i++) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    usleep(1000);
  }
  std::printf("child %d still running after 10 s: killed\n", child);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return 124;
}
