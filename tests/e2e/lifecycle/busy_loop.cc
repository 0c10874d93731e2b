// Allocates and frees without pause until it is killed, publishing its progress.
// Usage: e2e_busy_loop PROGRESS_FILE
// Iteration i (0, 1, 2, ...): alloc ((i % 64) + 1) x 64 KiB, free it: events 2i and 2i + 1. After each
// iteration (then a 200 us pause) the number of completed iterations is stored in the first 8 bytes of PROGRESS_FILE (a
// shared mapping, so the checker reads it without a pipe or a syscall from this side).
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "e2e_util.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 8) != 0) return 4;
  void* shared = mmap(nullptr, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (shared == MAP_FAILED) return 4;
  auto* done = static_cast<std::atomic<uint64_t>*>(shared);
  for (uint64_t i = 0;; i++) {
    void* p = nullptr;
    if (cudaMalloc(&p, ((i % 64) + 1) * 65536) != cudaSuccess || cudaFree(p) != cudaSuccess) return 3;
    done->store(i + 1, std::memory_order_release);
    usleep(200);  // a steady stream, not a flood: keeps the trace small enough to check event by event
  }
}
