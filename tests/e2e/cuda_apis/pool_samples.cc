// Stream-ordered pools whose reserved memory grows, shrinks at synchronizations and trims, and goes with
// the pool, through the runtime (built twice: shared and static runtime). check_pool_samples.py has the
// POOL_RESERVED sequence this must produce, worked out from the double's pool model
// (tests/fakecuda/driver_pools.h: grow to used bytes rounded up to 2 MiB; a synchronization shrinks to
// max(used, release threshold) rounded up; a trim to max(used, keep) rounded up).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>

#include "e2e_util.h"

int main() {
  cudaMemPool_t pool0;
  cudaEvent_t event;
  void *a, *b, *c, *d, *e, *f;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaStreamSynchronize(nullptr));  // no pool seen yet: nothing to sample
  E2E_OK(cudaDeviceGetMemPool(&pool0, 0));
  E2E_OK(cudaMallocAsync(&a, 3 * kMiB, nullptr));  // used 3, reserved 4
  E2E_OK(cudaMallocAsync(&b, 1 * kMiB, nullptr));  // used 4, reserved 4: unchanged
  E2E_OK(cudaMallocAsync(&c, 1 * kMiB, nullptr));  // used 5, reserved 6
  E2E_OK(cudaFreeAsync(a, nullptr));               // used 2
  E2E_OK(cudaStreamSynchronize(nullptr));          // threshold 0: reserved 2
  E2E_OK(cudaStreamSynchronize(nullptr));          // unchanged
  uint64_t threshold = 8 * kMiB;
  E2E_OK(cudaMemPoolSetAttribute(pool0, cudaMemPoolAttrReleaseThreshold, &threshold));
  E2E_OK(cudaMallocAsync(&d, 7 * kMiB, nullptr));  // used 9, reserved 10
  E2E_OK(cudaFreeAsync(d, nullptr));               // used 2
  E2E_OK(cudaEventCreate(&event));
  E2E_OK(cudaEventSynchronize(event));         // max(2, 8): reserved 8
  E2E_OK(cudaMemPoolTrimTo(pool0, 3 * kMiB));  // max(2, 3) rounded up: reserved 4
  E2E_OK(cudaEventDestroy(event));

  // A pool of device 1, created and used while device 0 is current.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 1;
  cudaMemPool_t user;
  E2E_OK(cudaMemPoolCreate(&user, &props));                      // first sample: 0
  E2E_OK(cudaMallocFromPoolAsync(&e, 5 * kMiB, user, nullptr));  // used 5, reserved 6
  E2E_OK(cudaFreeAsync(e, nullptr));                             // used 0
  E2E_OK(cudaStreamSynchronize(nullptr));                        // user: 0; pool0: max(2, 8) > 4: unchanged
  E2E_OK(cudaMallocFromPoolAsync(&f, 1 * kMiB, user, nullptr));  // used 1, reserved 2
  E2E_OK(cudaFreeAsync(f, nullptr));
  E2E_OK(cudaMemPoolDestroy(user));  // its memory goes with it: 0

  // The graph memory pool of device 0: 6 MiB reserved, 2 MiB in use by graphs; a trim keeps the 2.
  void* driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  auto set_graph_memory = reinterpret_cast<void (*)(int, uint64_t, uint64_t)>(
      driver ? dlsym(driver, "fakecuda_set_graph_memory") : nullptr);
  if (!set_graph_memory) return 4;
  set_graph_memory(0, 6 * kMiB, 2 * kMiB);
  E2E_OK(cudaDeviceGraphMemTrim(0));  // reserved 2
  E2E_OK(cudaDeviceGraphMemTrim(0));  // unchanged

  E2E_OK(cudaFreeAsync(b, nullptr));
  E2E_OK(cudaFreeAsync(c, nullptr));
  std::printf("pool0 %#llx user %#llx\n", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pool0)),
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(user)));
  return 0;
}
