// A parent and its children, each writing its own trace: fork, posix_spawn, fork + exec. MiB = 1048576 bytes.
// Each child runs to its end before the next starts (the parent waits), so their traces start in this order.
//   parent (e2e_family):          device 0: alloc A 4 MiB (live to the end)
//   child 1 (fork):               device 0: alloc 8 MiB, alloc 16 MiB, free the 8 MiB; exit(0)
//   spawned (posix_spawn of itself as "spawned"): cudaSetDevice(1), device 1: alloc 6 MiB, free it, alloc 2 MiB;
//                                 return 0
//   child 3 (fork):               device 0: alloc 1 MiB, then execv of itself as "execd" (same pid):
//     execd:                      device 0: alloc 3 MiB; cudaSetDevice(1), device 1: alloc 5 MiB, free it; return 0
//   parent, after all of them:    device 0: alloc D 2 MiB, free D; return 0
// Prints "child1 PID", "spawned PID" and "child3 PID" so that the checker knows whose trace is whose.
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "e2e_util.h"

extern char** environ;

namespace {

int wait_for(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string self_path() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) std::exit(4);
  return std::string(self, size_t(n));
}

int spawned() {
  void *a, *b;
  E2E_OK(cudaSetDevice(1));
  E2E_OK(cudaMalloc(&a, 6 * kMiB));
  E2E_OK(cudaFree(a));
  E2E_OK(cudaMalloc(&b, 2 * kMiB));
  return 0;
}

int execd() {
  void *a, *b;
  E2E_OK(cudaMalloc(&a, 3 * kMiB));
  E2E_OK(cudaSetDevice(1));
  E2E_OK(cudaMalloc(&b, 5 * kMiB));
  E2E_OK(cudaFree(b));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "spawned") == 0) return spawned();
  if (argc == 2 && std::strcmp(argv[1], "execd") == 0) return execd();
  if (argc != 1) return 2;
  std::string self = self_path();
  void *a, *d;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  std::fflush(stdout);

  pid_t child1 = fork();
  if (child1 == 0) {
    void *b, *c;
    E2E_OK(cudaMalloc(&b, 8 * kMiB));
    E2E_OK(cudaMalloc(&c, 16 * kMiB));
    E2E_OK(cudaFree(b));
    std::fflush(stdout);
    std::exit(0);
  }
  std::printf("child1 %d\n", child1);
  if (wait_for(child1) != 0) return 4;

  char spawned_arg[] = "spawned";
  char* spawn_argv[] = {self.data(), spawned_arg, nullptr};
  pid_t spawned_pid = 0;
  if (posix_spawn(&spawned_pid, self.c_str(), nullptr, nullptr, spawn_argv, environ) != 0) return 4;
  std::printf("spawned %d\n", spawned_pid);
  if (wait_for(spawned_pid) != 0) return 4;

  std::fflush(stdout);
  pid_t child3 = fork();
  if (child3 == 0) {
    void* e;
    E2E_OK(cudaMalloc(&e, 1 * kMiB));
    std::fflush(stdout);
    char execd_arg[] = "execd";
    char* exec_argv[] = {self.data(), execd_arg, nullptr};
    execv(self.c_str(), exec_argv);
    std::_Exit(4);
  }
  std::printf("child3 %d\n", child3);
  if (wait_for(child3) != 0) return 4;

  E2E_OK(cudaMalloc(&d, 2 * kMiB));
  E2E_OK(cudaFree(d));
  return 0;
}
