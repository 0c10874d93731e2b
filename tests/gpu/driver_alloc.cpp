// A driver-API program linked with -lcuda, with a known allocation sequence, for scripts/gpu-check. Its calls
// bind to the exported cuMemAlloc_v2 / cuMemCreate / ... of the preloaded tracer (cuda.h maps cuMemAlloc to
// cuMemAlloc_v2), the path plain -lcuda programs take.
//
// Sequence on device 0:
//   1. cuMemAlloc x3 (kAllocBytes[i])
//   2. cuMemCreate of 2 and 3 granules (granularity from cuMemGetAllocationGranularity, minimum), one address
//      reservation of 5 granules, both handles mapped into it, access set      peak of driver memory here
//   3. cuMemFree of the second cuMemAlloc
//   4. cuMemUnmap + cuMemRelease of the 2-granule handle                       the 3-granule one stays mapped
//   5. exit with kAllocBytes[0], kAllocBytes[2] and the 3-granule handle leaked on purpose
// cuMemCreate is memory (charged to its device from create to release); the reservation and the mappings are
// address space only. It prints, as one JSON line on stdout, the figures memtrace's analyzer must report.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kMiB = 1024 * 1024;
constexpr int kAllocCount = 3;
constexpr size_t kAllocBytes[kAllocCount] = {3 * kMiB + 4096, 7 * kMiB + 512, 1 * kMiB + 100};

void check(CUresult res, const char* what) {
  if (res != CUDA_SUCCESS) {
    const char* name = "?";
    cuGetErrorName(res, &name);
    std::fprintf(stderr, "driver_alloc: %s failed: %s\n", what, name);
    std::exit(1);
  }
}

}  // namespace

int main() {
  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

  CUdeviceptr ptrs[kAllocCount];
  size_t alloc_total = 0;
  for (int i = 0; i < kAllocCount; ++i) {
    check(cuMemAlloc(&ptrs[i], kAllocBytes[i]), "cuMemAlloc");
    check(cuMemsetD8(ptrs[i], 0, kAllocBytes[i]), "cuMemsetD8");
    alloc_total += kAllocBytes[i];
  }

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  check(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  const size_t small_bytes = 2 * granularity;
  const size_t large_bytes = 3 * granularity;

  CUmemGenericAllocationHandle small_handle, large_handle;
  check(cuMemCreate(&small_handle, small_bytes, &prop, 0), "cuMemCreate");
  check(cuMemCreate(&large_handle, large_bytes, &prop, 0), "cuMemCreate");
  CUdeviceptr va;
  check(cuMemAddressReserve(&va, small_bytes + large_bytes, granularity, 0, 0), "cuMemAddressReserve");
  check(cuMemMap(va, small_bytes, 0, small_handle, 0), "cuMemMap");
  check(cuMemMap(va + small_bytes, large_bytes, 0, large_handle, 0), "cuMemMap");
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check(cuMemSetAccess(va, small_bytes + large_bytes, &access, 1), "cuMemSetAccess");
  check(cuMemsetD8(va, 1, small_bytes + large_bytes), "cuMemsetD8");
  check(cuCtxSynchronize(), "cuCtxSynchronize");

  check(cuMemFree(ptrs[1]), "cuMemFree");
  check(cuMemUnmap(va, small_bytes), "cuMemUnmap");
  check(cuMemRelease(small_handle), "cuMemRelease");
  check(cuCtxSynchronize(), "cuCtxSynchronize");

  // With G the granularity (2 MiB on current GPUs):
  //   cuMemAlloc total = 3 MiB + 4096 + 7 MiB + 512 + 1 MiB + 100 = 11 MiB + 4708 = 11,534,336 + 4,708 = 11,539,044 B
  //   peak driver  = 11,539,044 + 2G + 3G = 11,539,044 + 5G              (22,024,804 B when G = 2 MiB)
  //   final driver = 11,539,044 - (7 MiB + 512) + 3G = 4,198,500 + 3G   (10,489,956 B when G = 2 MiB)
  //   allocations 3 + 2 = 5, frees 1 + 1 = 2, leaked 3 (2 cuMemAlloc + 1 handle)
  const size_t final_bytes = alloc_total - kAllocBytes[1] + large_bytes;
  std::printf(
      "{\"device\": 0, \"granularity_bytes\": %zu, \"driver_allocations\": %d, \"driver_frees\": 2, "
      "\"block_allocations\": 0, \"block_frees\": 0, \"peak_driver_bytes\": %zu, \"final_driver_bytes\": %zu, "
      "\"peak_allocated_bytes\": %zu, \"final_allocated_bytes\": %zu, \"leak_count\": 3, \"leak_bytes\": %zu}\n",
      granularity, kAllocCount + 2, alloc_total + small_bytes + large_bytes, final_bytes,
      alloc_total + small_bytes + large_bytes, final_bytes, final_bytes);
  return 0;
}
