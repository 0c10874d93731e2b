// A dormant process forks (check_fork_dormant.py). Usage: e2e_fork_dormant
// The parent cudaMallocs 1 MiB (its first CUDA call: dormant from here), prints "parent PID ADDRESS", forks, and
// waits for the child, then for "exit" on stdin. The child prints "child PID", waits for SIGUSR1, cudaMallocs 2 MiB
// (its own first CUDA call), prints "child ADDRESS", waits for SIGUSR2 and exits 0.
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

namespace {

void wait_for(int signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  int got = 0;
  sigwait(&set, &got);
}

}  // namespace

int main() {
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGUSR1);
  sigaddset(&both, SIGUSR2);
  sigprocmask(SIG_BLOCK, &both, nullptr);  // inherited: the child takes them with sigwait
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 3;
  std::printf("parent %d %llu\n", getpid(), static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    std::printf("child %d\n", getpid());
    std::fflush(stdout);
    wait_for(SIGUSR1);
    void* q = nullptr;
    if (cudaMalloc(&q, 2 << 20) != cudaSuccess) _exit(3);
    std::printf("child %llu\n", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(q)));
    std::fflush(stdout);
    wait_for(SIGUSR2);
    return 0;
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
  std::string command;
  while (std::getline(std::cin, command))
    if (command == "exit") return 0;
  return 1;
}
