// Checks of the CUDA test double on its own. Runs with FAKECUDA_TOTAL_BYTES=64 MiB and 2 devices
// (set by CMake), so every free/total figure below follows from 64 MiB = 67108864 bytes.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
extern "C" unsigned long fakecuda_proc_address_lookups();

namespace {

constexpr size_t kMiB = 1u << 20;
constexpr size_t kTotalBytes = 64 * kMiB;

void* resolve(const char* name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  void* fn = nullptr;
  cuGetProcAddress_v2(name, &fn, version, flags, status);
  return fn;
}

void bind(int device) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext context = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, device), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
}

size_t free_bytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo_v2(&free, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, kTotalBytes);
  return free;
}

TEST(Resolver, PicksTheAbiOfTheRequestedVersion) {
  CUdriverProcAddressQueryResult status;
  EXPECT_EQ(resolve("cuMemAlloc", 3020, 0, &status), dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(resolve("cuMemAlloc", 3010, 0, &status), nullptr);  // only the _v2 ABI exists here
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(resolve("cuNoSuchFunction", 13000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

// The CUDA 13 runtime asks for "cuDevicePrimaryCtxReset" at 7000 (measured on the H200): CUDA 7.0's function,
// exported under its plain name; from 11000 the _v2 one.
TEST(Resolver, PrimaryContextResetHasTwoAbis) {
  void* v7000 = resolve("cuDevicePrimaryCtxReset", 7000, 0, nullptr);
  ASSERT_NE(v7000, nullptr);
  EXPECT_EQ(v7000, dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxReset"));
  EXPECT_EQ(resolve("cuDevicePrimaryCtxReset", 13000, 0, nullptr), dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxReset_v2"));
  EXPECT_NE(v7000, dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxReset_v2"));
}

TEST(Resolver, PerThreadStreamFlagSelectsPtsz) {
  EXPECT_EQ(resolve("cuMemAllocAsync", 11020, 0, nullptr), dlsym(RTLD_DEFAULT, "cuMemAllocAsync"));
  EXPECT_EQ(resolve("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr),
            dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
  // No per-thread variant: the one entry point serves both flavours.
  EXPECT_EQ(resolve("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr),
            dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
}

TEST(Resolver, ResolvesItselfWithTheAbiOfTheVersion) {
  EXPECT_EQ(resolve("cuGetProcAddress", 11030, 0, nullptr), dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
  EXPECT_EQ(resolve("cuGetProcAddress", 12000, 0, nullptr), dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
  void* fn = nullptr;
  EXPECT_EQ(cuGetProcAddress("cuMemFree", &fn, 3020, 0), CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
}

TEST(Driver, AllocationBeyondFreeMemoryFailsAndChargesNothing) {
  bind(0);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 40 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), 24 * kMiB);  // 64 - 40
  EXPECT_EQ(cuMemAlloc_v2(&b, 30 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(free_bytes(), 24 * kMiB);
  bind(1);
  EXPECT_EQ(free_bytes(), 64 * kMiB);        // device 1 untouched
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);  // freeing device 0 memory while device 1 is current
  bind(0);
  EXPECT_EQ(free_bytes(), 64 * kMiB);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);  // double free
}

TEST(Driver, PitchManagedAndPoolAccounting) {
  bind(0);
  CUdeviceptr pitched = 0, managed = 0, pooled = 0;
  size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 100, 4), CUDA_SUCCESS);
  EXPECT_EQ(pitch, 1024u);                        // 1000 rounded up to 512
  EXPECT_EQ(free_bytes(), kTotalBytes - 102400);  // 1024 * 100
  ASSERT_EQ(cuMemAllocManaged(&managed, 8 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes - 102400);  // managed memory is not charged
  ASSERT_EQ(cuMemAllocAsync(&pooled, 2 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes - 102400 - 2 * kMiB);
  int device = -1;
  EXPECT_EQ(cuPointerGetAttribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pooled + 5), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(cuMemFree_v2(pooled), CUDA_SUCCESS);  // cuMemFree of pool memory is legal
  EXPECT_EQ(cuMemFree_v2(managed), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(pitched), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes);
}

TEST(Driver, PhysicalMemoryIsChargedToItsDeviceUntilReleased) {
  bind(0);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes);  // device 0 is current; device 1 was charged
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 4 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 4 * kMiB, &access, 1), CUDA_SUCCESS);
  reinterpret_cast<char*>(va)[4 * kMiB - 1] = 1;  // mapped memory is usable
  bind(1);
  EXPECT_EQ(free_bytes(), 60 * kMiB);
  EXPECT_EQ(cuMemUnmap(va, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(va, 8 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), 64 * kMiB);
}

TEST(Runtime, UsesTheDriverThroughTheResolverOnly) {
  unsigned long lookups_before = fakecuda_proc_address_lookups();
  void* p = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 1);
  ASSERT_EQ(cudaMalloc(&p, 3 * kMiB), cudaSuccess);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(free, 61 * kMiB);  // 64 - 3
  EXPECT_EQ(cudaMalloc(&p, 100 * kMiB), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  // The runtime loaded its table at first use: 2 self look-ups + cuCtxGetDevice at 13000 + 17 entry points
  // for device memory + 26 for host memory, arrays, imports, teardown, streams and graphs = 46. (Earlier tests
  // in this process may have loaded it already; then no new look-up happens at all.)
  unsigned long lookups = fakecuda_proc_address_lookups() - lookups_before;
  EXPECT_TRUE(lookups == 0 || lookups == 46) << lookups;
}

TEST(Driver, ContextResetFreesWhatTheDriverFreesWithAContext) {
  bind(1);
  CUdeviceptr device_memory = 0;
  void* pinned = nullptr;
  CUarray array = nullptr;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemAlloc_v2(&device_memory, 3 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocHost_v2(&pinned, 1 * kMiB), CUDA_SUCCESS);  // host memory: not charged
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = 1000;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  ASSERT_EQ(cuArrayCreate_v2(&array, &desc), CUDA_SUCCESS);  // 4000 bytes, charged as 64 KiB = 65536
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes - 3 * kMiB - 65536 - 2 * kMiB);
  ASSERT_EQ(cuDevicePrimaryCtxReset_v2(1), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes - 2 * kMiB);                   // the VMM handle outlives the context
  EXPECT_EQ(cuMemFree_v2(device_memory), CUDA_ERROR_INVALID_VALUE);  // already gone
  EXPECT_EQ(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes);
}

// As on the H200: destroying a context made with cuCtxCreate frees its own allocations and leaves the
// primary context's on the same device alone. The two contexts are distinct handles, and cuCtxGetCurrent
// names whichever is current (the tracer records it on every allocation).
TEST(Driver, CreatedContextIsNotThePrimaryContext) {
  bind(0);
  CUcontext primary = nullptr, own = nullptr, current = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, primary);
  CUdeviceptr in_primary = 0, in_own = 0;
  ASSERT_EQ(cuMemAlloc_v2(&in_primary, 5 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxCreate_v4(&own, nullptr, 0, 0), CUDA_SUCCESS);
  EXPECT_NE(own, primary);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, own);  // cuCtxCreate makes the new context current
  ASSERT_EQ(cuMemAlloc_v2(&in_own, 3 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes - 8 * kMiB);  // 5 + 3 MiB on device 0
  ASSERT_EQ(cuCtxDestroy_v2(own), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, nullptr);  // the destroyed context was current: none is now
  ASSERT_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes - 5 * kMiB);  // only in_own went with its context
  EXPECT_EQ(cuMemFree_v2(in_own), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree_v2(in_primary), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes);
}

// What a dormant tracer asks at attach (resolver.cc: device_and_context_of_pointer): the device and context an
// address was allocated on and in, for any address inside the allocation; an address of none is refused.
TEST(Driver, PointerAttributesNameTheDeviceAndContextOfTheAllocation) {
  bind(1);
  CUcontext primary = nullptr, own = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&primary, 1), CUDA_SUCCESS);
  CUdeviceptr in_primary = 0, in_own = 0;
  ASSERT_EQ(cuMemAlloc_v2(&in_primary, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxCreate_v4(&own, nullptr, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc_v2(&in_own, kMiB), CUDA_SUCCESS);
  int device = -1;
  CUcontext context = nullptr;
  EXPECT_EQ(cuPointerGetAttribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, in_primary), CUDA_SUCCESS);
  EXPECT_EQ(device, 1);
  EXPECT_EQ(cuPointerGetAttribute(&context, CU_POINTER_ATTRIBUTE_CONTEXT, in_primary + 4096), CUDA_SUCCESS);
  EXPECT_EQ(context, primary);
  EXPECT_EQ(cuPointerGetAttribute(&context, CU_POINTER_ATTRIBUTE_CONTEXT, in_own), CUDA_SUCCESS);
  EXPECT_EQ(context, own);
  ASSERT_EQ(cuCtxDestroy_v2(own), CUDA_SUCCESS);
  EXPECT_EQ(cuPointerGetAttribute(&context, CU_POINTER_ATTRIBUTE_CONTEXT, in_own), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuCtxSetCurrent(primary), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(in_primary), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes);
}

TEST(Driver, OnlyDeferredMappingArraysHaveMemoryRequirements) {
  bind(0);
  CUarray plain = nullptr, deferred = nullptr;
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = desc.Height = 100;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  ASSERT_EQ(cuArray3DCreate_v2(&plain, &desc), CUDA_SUCCESS);
  desc.Flags = CUDA_ARRAY3D_DEFERRED_MAPPING;
  ASSERT_EQ(cuArray3DCreate_v2(&deferred, &desc), CUDA_SUCCESS);
  CUDA_ARRAY_MEMORY_REQUIREMENTS requirements{};
  EXPECT_EQ(cuArrayGetMemoryRequirements(&requirements, plain, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuArrayGetMemoryRequirements(&requirements, deferred, 0), CUDA_SUCCESS);
  EXPECT_EQ(requirements.size, 65536u);  // 100 x 100 x 4 = 40000, rounded up to 64 KiB
  EXPECT_EQ(cuArrayDestroy(plain), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(deferred), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes);
}

TEST(Driver, AllocationsDuringCaptureAreGraphNodesNotMemory) {
  bind(0);
  CUstream stream = reinterpret_cast<CUstream>(0x7100);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  ASSERT_EQ(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamGetCaptureInfo_v3(stream, &status, &id, nullptr, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_NE(id, 0u);
  CUdeviceptr node = 0;
  ASSERT_EQ(cuMemAllocAsync(&node, 4 * kMiB, stream), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), kTotalBytes);  // the double runs no graph: a node is never charged
  ASSERT_EQ(cuStreamGetCaptureInfo_v3(nullptr, &status, nullptr, nullptr, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);  // the legacy stream is another stream
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  EXPECT_NE(graph, nullptr);
  ASSERT_EQ(cuStreamGetCaptureInfo_v3(stream, &status, nullptr, nullptr, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_ILLEGAL_STATE);
}

}  // namespace
