// Waits to be killed with SIGKILL after its allocations have had time to be flushed.
// Usage: e2e_kill_wait READY_FILE SLEEP_MS
// Events: alloc 4 MiB, alloc 8 MiB, alloc 16 MiB, free 8 MiB (4 events). Then it sleeps SLEEP_MS (the
// checker passes several flush intervals), creates READY_FILE and waits for the signal. Nothing is
// recorded after the sleep, so everything was due to be flushed before READY_FILE appeared.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "e2e_util.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void *a, *b, *c;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  E2E_OK(cudaMalloc(&b, 8 * kMiB));
  E2E_OK(cudaMalloc(&c, 16 * kMiB));
  E2E_OK(cudaFree(b));
  std::fflush(stdout);
  usleep(static_cast<useconds_t>(std::atoi(argv[2])) * 1000);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return 4;
  close(fd);
  for (;;) pause();
}
