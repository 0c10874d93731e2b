// exec: the first image records, then replaces itself with a second image of this program, which
// records its own trace (LD_PRELOAD and MEMTRACE_OUTPUT inherited, same pid).
// Usage: e2e_exec_chain first FUNCTION   (then runs itself as: e2e_exec_chain second), FUNCTION one of
//   execv execve execvp execvpe execl execlp execle posix_spawn
// First image's events: alloc 4 MiB (1 event), then the exec.
// Second image's events: alloc 8 MiB, free 8 MiB (2 events), then return 0.
// With posix_spawn instead, "second" runs as a child process (its own pid) and the first image waits for
// it and returns 0 (its 4 MiB never freed).
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "e2e_util.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "second") == 0) {
    void* b;
    E2E_OK(cudaMalloc(&b, 8 * kMiB));
    E2E_OK(cudaFree(b));
    return 0;
  }
  if (argc != 3 || std::strcmp(argv[1], "first") != 0) return 2;
  void* a;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  std::fflush(stdout);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 4;
  self[n] = '\0';
  char second[] = "second";
  char* next_argv[] = {self, second, nullptr};
  const char* how = argv[2];
  if (std::strcmp(how, "execv") == 0) execv(self, next_argv);
  if (std::strcmp(how, "execve") == 0) execve(self, next_argv, environ);
  if (std::strcmp(how, "execvp") == 0) execvp(self, next_argv);
  if (std::strcmp(how, "execvpe") == 0) execvpe(self, next_argv, environ);
  if (std::strcmp(how, "execl") == 0) execl(self, self, second, static_cast<char*>(nullptr));
  if (std::strcmp(how, "execlp") == 0) execlp(self, self, second, static_cast<char*>(nullptr));
  if (std::strcmp(how, "execle") == 0) execle(self, self, second, static_cast<char*>(nullptr), environ);
  if (std::strcmp(how, "posix_spawn") == 0) {
    pid_t child = 0;
    int status = 0;
    if (posix_spawn(&child, self, nullptr, nullptr, next_argv, environ) != 0) return 4;
    std::printf("child %d\n", child);
    if (waitpid(child, &status, 0) != child) return 4;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
  }
  std::perror("exec");
  return 4;
}
