// A job signalled while its thread is somewhere a signal handler must not wait for: where untraced it dies (or
// its handler exits) at once, traced it must too, with its trace complete.
//   signal_races malloc READY        cudaMalloc 1 MiB x 4, then malloc/free of 64 KiB blocks forever: a SIGTERM
//                                    then lands inside malloc (its arena lock held) almost every time.
//   signal_races exit_handler READY  a SIGTERM handler that calls _exit(3); cudaMalloc 1 MiB, then cudaMalloc /
//                                    cudaFree of 4 KiB forever: the signal lands inside the tracer's hooks.
// READY is created once the loop is about to start, for the checker to send the signal.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"

namespace {

void exit_on_signal(int) { _exit(3); }

void mark_ready(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const bool exit_handler = strcmp(argv[1], "exit_handler") == 0;
  if (exit_handler) signal(SIGTERM, exit_on_signal);
  void* p = nullptr;
  for (int i = 0; i < (exit_handler ? 1 : 4); i++) E2E_OK(cudaMalloc(&p, kMiB));
  mark_ready(argv[2]);
  if (exit_handler) {
    for (;;) {
      cudaMalloc(&p, 4096);
      cudaFree(p);
    }
  }
  char* volatile kept = nullptr;
  for (;;) {
    char* block = static_cast<char*>(malloc(65536));
    block[0] = 1;
    kept = block;
    free(block);
  }
}
