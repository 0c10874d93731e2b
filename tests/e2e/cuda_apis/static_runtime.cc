// A program with the runtime linked in statically and hidden (like nvcc's default build): no cuda*
// symbol of it can be interposed, so its allocations are visible only through the driver functions
// it obtains from cuGetProcAddress. Also frees pool memory with cudaFree (legal) and uses the
// per-thread-default-stream entry points.
#include <cuda_runtime_api.h>

#include "e2e_util.h"

extern "C" {
decltype(cudaMallocAsync) cudaMallocAsync_ptsz;
decltype(cudaFreeAsync) cudaFreeAsync_ptsz;
}

int main() {
  void *p, *a, *q, *pitched;
  size_t pitch = 0;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaMallocAsync(&p, 1 * kMiB, nullptr));  // device 0's first event is a pool block
  E2E_OK(cudaMalloc(&a, 3 * kMiB));
  E2E_OK(cudaMallocAsync_ptsz(&q, 2 * kMiB, nullptr));
  E2E_OK(cudaFree(a));
  E2E_OK(cudaFree(p));                                   // pool memory returned through cuMemFree
  E2E_OK(cudaMallocPitch(&pitched, &pitch, 1000, 100));  // 100 rows of 1024 bytes: never freed
  E2E_OK(cudaFreeAsync_ptsz(q, nullptr));
  std::printf("pitch %zu, live at exit: %p\n", pitch, pitched);
  return pitch == 1024 ? 0 : 4;
}
