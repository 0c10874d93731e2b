// fork(): a child that allocates gets its own trace; a child that never calls CUDA gets none.
// Sequence (MiB = 1048576 bytes):
//   parent: alloc A 4 MiB (live across the forks)
//   child 1: alloc B 8 MiB, alloc C 16 MiB, free B, exit(0)       -> its own file, 3 events
//   child 2: no CUDA call; exit(0) when it has exactly one thread (no tracer thread was started for
//            it), else exit(5)                                      -> no file
//   parent (after both children ended): alloc D 2 MiB, free A, free D -> 4 events in the parent's file
// Prints "child1 PID" and "child2 PID" so that the checker knows whose file is whose.
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "e2e_util.h"

namespace {

int thread_count() {
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return -1;
  int count = 0;
  while (dirent* entry = readdir(tasks))
    if (entry->d_name[0] != '.') count++;
  closedir(tasks);
  return count;
}

int wait_for(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main() {
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
  pid_t child2 = fork();
  if (child2 == 0) std::exit(thread_count() == 1 ? 0 : 5);
  std::printf("child1 %d\nchild2 %d\n", child1, child2);
  int status1 = wait_for(child1);
  int status2 = wait_for(child2);
  std::printf("child1 status %d, child2 status %d\n", status1, status2);
  if (status1 != 0 || status2 != 0) return 4;
  E2E_OK(cudaMalloc(&d, 2 * kMiB));
  E2E_OK(cudaFree(a));
  E2E_OK(cudaFree(d));
  return 0;
}
