// One process, two GPUs, stream-ordered memory on a stream of device 1, for `scripts/gpu-check --multi-gpu`.
// cudaMallocAsync takes its block from the pool of the stream's device, whichever device is current (CUDA's
// reference), and cudaFreeAsync returns it there:
//   1. cudaSetDevice(1), a stream of device 1, cudaMallocAsync(128 MiB) on it       device 1: 0 -> 128 MiB
//   2. cudaSetDevice(0), cudaFreeAsync on that stream, stream synchronized           device 1: 128 MiB -> 0
//   3. device 0 still current: cudaMallocAsync(64 MiB) on the stream, then free      device 1: 0 -> 64 MiB -> 0
// Device 0 never has memory of this program. It prints, as one JSON line, the figures memtrace must report per
// device (multi_gpu_checks.py program): device 1's allocated peak 128 MiB and final 0, two block allocations and
// two frees, no driver allocation; its reserved is its default pool's CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH (read here
// from the driver as ground truth: the pool's largest reservation, which the tracer samples after each allocation).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kFirstBytes = 128 * kMiB;
constexpr size_t kSecondBytes = 64 * kMiB;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "two_device_async: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

}  // namespace

int main() {
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (devices < 2) {
    std::fprintf(stderr, "two_device_async: needs 2 GPUs, %d visible\n", devices);
    return 3;
  }
  cudaStream_t stream;
  void *first = nullptr, *second = nullptr;
  check(cudaSetDevice(1), "cudaSetDevice(1)");
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  check(cudaMallocAsync(&first, kFirstBytes, stream), "cudaMallocAsync (device 1 current)");
  check(cudaMemsetAsync(first, 1, kFirstBytes, stream), "cudaMemsetAsync");
  check(cudaSetDevice(0), "cudaSetDevice(0)");
  check(cudaFreeAsync(first, stream), "cudaFreeAsync (device 0 current)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaMallocAsync(&second, kSecondBytes, stream), "cudaMallocAsync (device 0 current)");
  cudaPointerAttributes attributes{};
  check(cudaPointerGetAttributes(&attributes, second), "cudaPointerGetAttributes");
  check(cudaFreeAsync(second, stream), "cudaFreeAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, 1), "cudaDeviceGetDefaultMemPool(1)");
  unsigned long long reserved_high_bytes = 0;
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved_high_bytes),
        "cudaMemPoolGetAttribute(ReservedMemHigh)");
  std::fprintf(stderr, "two_device_async: the second block is on device %d\n", attributes.device);
  std::printf(
      "{\"devices\": {\"1\": {\"peak_allocated_bytes\": %zu, \"final_allocated_bytes\": 0, "
      "\"peak_reserved_bytes\": %llu, \"block_allocations\": 2, \"block_frees\": 2, \"driver_allocations\": 0}}, "
      "\"second_block_device\": %d}\n",
      kFirstBytes, reserved_high_bytes, attributes.device);
  return 0;
}
