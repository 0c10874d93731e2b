// A plain job for the tests about where and how the trace is written (unique names, file mode, output
// directory, recorded command line, other preloaded interposers): three allocations, two frees, no
// crash. Its command-line arguments are ignored (they are there to be recorded, or redacted).
// Events, in order: alloc 4 MiB, alloc 8 MiB, alloc 16 MiB, free 8 MiB, free 4 MiB: 5 events; 16 MiB live.
#include <cuda_runtime_api.h>

#include "e2e_util.h"

int main() {
  void *a, *b, *c;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  E2E_OK(cudaMalloc(&b, 8 * kMiB));
  E2E_OK(cudaMalloc(&c, 16 * kMiB));
  E2E_OK(cudaFree(b));
  E2E_OK(cudaFree(a));
  std::printf("done, %p still live\n", c);
  return 0;
}
