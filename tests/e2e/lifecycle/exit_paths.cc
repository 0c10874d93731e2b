// Ends without atexit handlers (_exit, _Exit) or normally (return from main).
// Usage: e2e_exit_paths _exit|_Exit|return
// Events: alloc 4 MiB, alloc 8 MiB, free 4 MiB (3 events). Exit status: _exit 7, _Exit 9, return 5.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "e2e_util.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void *a, *b;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  E2E_OK(cudaMalloc(&b, 8 * kMiB));
  E2E_OK(cudaFree(a));
  std::fflush(stdout);
  if (std::strcmp(argv[1], "_exit") == 0) _exit(7);
  if (std::strcmp(argv[1], "_Exit") == 0) _Exit(9);
  return 5;
}
