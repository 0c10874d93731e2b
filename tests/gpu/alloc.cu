// A CUDA runtime program with a known allocation sequence, for scripts/gpu-check. Built twice by nvcc: with its
// default static cudart (memory calls reach the driver through cuGetProcAddress, never through an exported
// cudaMalloc) and with -cudart shared (exported cudaMalloc AND the driver call beneath it are both visible);
// memtrace must count each allocation once either way.
//
// Sequence on device 0 (sizes distinct and not round, so a wrong pairing shows):
//   1. cudaMallocAsync(kAsyncBytes) on a created stream           one pool block, kept live during 2.
//   2. cudaMalloc x8 (kMallocBytes[i])                            peak of driver memory is reached here
//   3. cudaFreeAsync of the block, stream synchronized
//   4. cudaFree of the odd-indexed four                           the even-indexed four are leaked on purpose
// It prints, as one JSON line on stdout, the figures memtrace's analyzer must report for device 0, following
// its rules (README, "Definitions"): driver_bytes counts live driver allocations plus what each stream-ordered pool
// has reserved (its CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, read here from the driver as ground truth); once a device
// has seen a block-layer event, allocated_bytes counts live blocks only (here: the async block, seen first).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kMiB = 1024 * 1024;
constexpr int kMallocCount = 8;
constexpr size_t kMallocBytes[kMallocCount] = {
    1 * kMiB + 256,   3 * kMiB + 512,  5 * kMiB + 1000, 7 * kMiB + 4096,
    11 * kMiB + 24,   13 * kMiB + 768, 17 * kMiB + 8,   19 * kMiB + 2048,
};
constexpr size_t kAsyncBytes = 2 * kMiB + 4000;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "alloc: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

}  // namespace

int main() {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  void* block = nullptr;
  check(cudaMallocAsync(&block, kAsyncBytes, stream), "cudaMallocAsync");
  check(cudaMemsetAsync(block, 0, kAsyncBytes, stream), "cudaMemsetAsync");
  // The default pool rounds its reservation up (32 MiB for this block on the H200): the driver says how much.
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
  unsigned long long pool_reserved_bytes = 0;
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &pool_reserved_bytes),
        "cudaMemPoolGetAttribute");

  void* ptrs[kMallocCount];
  size_t all_malloc_bytes = 0;
  for (int i = 0; i < kMallocCount; ++i) {
    check(cudaMalloc(&ptrs[i], kMallocBytes[i]), "cudaMalloc");
    check(cudaMemset(ptrs[i], i, kMallocBytes[i]), "cudaMemset");
    all_malloc_bytes += kMallocBytes[i];
  }

  check(cudaFreeAsync(block, stream), "cudaFreeAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  size_t leaked_bytes = 0;
  for (int i = 0; i < kMallocCount; ++i) {
    if (i % 2 == 1) {
      check(cudaFree(ptrs[i]), "cudaFree");
    } else {
      leaked_bytes += kMallocBytes[i];
    }
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  // Worked out by hand from the table above:
  //   all eight cudaMalloc: 1+3+5+7+11+13+17+19 = 76 MiB + (256+512+1000+4096+24+768+8+2048 = 8712) B
  //                         = 79,691,776 + 8,712 = 79,700,488 B
  //   peak driver (all eight + the pool's reservation holding the block) = 79,700,488 + pool_reserved_bytes
  //                         (79,700,488 + 33,554,432 = 113,254,920 B on the H200)
  //   leaked (even indices) = 1+5+11+17 = 34 MiB + (256+1000+24+8 = 1288) B = 35,651,584 + 1,288 = 35,652,872 B
  std::printf(
      "{\"device\": 0, \"driver_allocations\": %d, \"driver_frees\": %d, \"block_allocations\": 1, "
      "\"block_frees\": 1, \"peak_driver_bytes\": %zu, \"final_driver_bytes\": %zu, "
      "\"peak_allocated_bytes\": %zu, \"final_allocated_bytes\": 0, \"leak_count\": %d, \"leak_bytes\": %zu}\n",
      kMallocCount, kMallocCount / 2, all_malloc_bytes + size_t(pool_reserved_bytes), leaked_bytes, kAsyncBytes,
      kMallocCount / 2, leaked_bytes);
  return 0;
}
