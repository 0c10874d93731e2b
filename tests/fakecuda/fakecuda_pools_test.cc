// Checks of the double's pools, graph memory, PCI bus ids and fake NVML on their own (no tracer). Runs with
// FAKECUDA_TOTAL_BYTES=64 MiB and 2 devices (set by CMake). The pool model is driver_pools.h's: grow to the
// used bytes rounded up to 2 MiB, shrink at a synchronization to max(used, release threshold) rounded up,
// trim to max(used, keep) rounded up.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>

extern "C" {
void fakecuda_set_graph_memory(int device, uint64_t reserved_bytes, uint64_t used_bytes);
CUresult cuStreamSynchronize_ptsz(CUstream stream);
}

namespace {

constexpr uint64_t kMiB = 1u << 20;

void bind(int device) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext context = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, device), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
}

uint64_t attribute(CUmemoryPool pool, CUmemPool_attribute which) {
  cuuint64_t value = 0;
  EXPECT_EQ(cuMemPoolGetAttribute(pool, which, &value), CUDA_SUCCESS);
  return value;
}
uint64_t reserved(CUmemoryPool pool) { return attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT); }

TEST(Pools, GrowInTwoMibStepsAndShrinkAtSynchronizationsToTheirThreshold) {
  bind(0);
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(cuMemAllocAsync(&a, 3 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 4 * kMiB);  // 3 rounded up to 2 MiB steps
  ASSERT_EQ(cuMemAllocAsync(&b, 1 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 4 * kMiB);  // 4 used: still fits
  ASSERT_EQ(cuMemAllocAsync(&c, 1 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 6 * kMiB);  // 5 used
  EXPECT_EQ(attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 5 * kMiB);
  ASSERT_EQ(cuMemFreeAsync(a, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 6 * kMiB);  // a free keeps the memory
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 2 * kMiB);  // threshold 0: down to the 2 MiB used
  cuuint64_t threshold = 8 * kMiB;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&a, 9 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 12 * kMiB);  // 11 used
  ASSERT_EQ(cuMemFreeAsync(a, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 8 * kMiB);  // max(2 used, 8 threshold)
  ASSERT_EQ(cuMemPoolTrimTo(pool, 3 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 4 * kMiB);  // max(2 used, 3 kept) rounded up
  ASSERT_EQ(cuMemFreeAsync(b, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(c, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 0u);
  threshold = 0;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold), CUDA_SUCCESS);
}

TEST(Pools, CreatedPoolsKeepTheirBlocksAndAnswerThePointerAttribute) {
  bind(0);
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 0u);
  CUdeviceptr block = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&block, 5 * kMiB, pool, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 6 * kMiB);
  CUmemoryPool of_block = nullptr;
  ASSERT_EQ(cuPointerGetAttribute(&of_block, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, block), CUDA_SUCCESS);
  EXPECT_EQ(of_block, pool);
  ASSERT_EQ(cuMemFreeAsync(block, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize_ptsz(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(reserved(pool), 0u);
  ASSERT_EQ(cuMemPoolDestroy(pool), CUDA_SUCCESS);
  CUmemoryPool default_pool = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&default_pool, 1), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolDestroy(default_pool), CUDA_ERROR_INVALID_VALUE);  // a default pool is never destroyed
}

TEST(GraphMemory, TrimKeepsWhatGraphsUse) {
  bind(0);
  fakecuda_set_graph_memory(1, 6 * kMiB, 2 * kMiB);
  cuuint64_t value = 0;
  ASSERT_EQ(cuDeviceGetGraphMemAttribute(1, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_SUCCESS);
  EXPECT_EQ(value, 6 * kMiB);
  ASSERT_EQ(cuDeviceGraphMemTrim(1), CUDA_SUCCESS);
  ASSERT_EQ(cuDeviceGetGraphMemAttribute(1, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_SUCCESS);
  EXPECT_EQ(value, 2 * kMiB);
}

TEST(PciBusIds, RunInTheReverseOrderOfOrdinals) {
  bind(0);
  char bus_id[32];
  ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof bus_id, 0), CUDA_SUCCESS);
  EXPECT_EQ(std::string(bus_id), "0000:c0:00.0");
  ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof bus_id, 1), CUDA_SUCCESS);
  EXPECT_EQ(std::string(bus_id), "0000:be:00.0");  // 0xc0 - 2
  EXPECT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof bus_id, 2), CUDA_ERROR_INVALID_DEVICE);
}

// The fake NVML, loaded from its own directory as the tracer would load libnvidia-ml.so.1.
TEST(FakeNvml, ReportsThisProcessTheOthersAndWhatIsFree) {
  bind(1);
  void* nvml = dlopen(FAKECUDA_NVML_DIR "/libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nvml, nullptr) << dlerror();
  auto init = reinterpret_cast<int (*)()>(dlsym(nvml, "nvmlInit_v2"));
  auto by_bus_id = reinterpret_cast<int (*)(const char*, void**)>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  struct Memory {
    unsigned long long total, free, used;
  };
  auto memory_info = reinterpret_cast<int (*)(void*, Memory*)>(dlsym(nvml, "nvmlDeviceGetMemoryInfo"));
  struct Process {
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
  };
  auto processes =
      reinterpret_cast<int (*)(void*, unsigned*, Process*)>(dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3"));
  ASSERT_TRUE(init && by_bus_id && memory_info && processes);
  setenv("FAKENVML_CONTEXT_BYTES", "3145728", 1);                 // 3 MiB
  setenv("FAKENVML_OTHER_PROCESS_BYTES", "1048576,10485760", 1);  // device 1: 10 MiB
  ASSERT_EQ(init(), 0);
  void* device = nullptr;
  EXPECT_EQ(by_bus_id("0000:c1:00.0", &device), 6);  // NVML_ERROR_NOT_FOUND: no such bus
  ASSERT_EQ(by_bus_id("0000:be:00.0", &device), 0);  // CUDA ordinal 1
  CUdeviceptr block = 0;
  ASSERT_EQ(cuMemAlloc(&block, 5 * kMiB), CUDA_SUCCESS);
  Memory memory{};
  ASSERT_EQ(memory_info(device, &memory), 0);
  EXPECT_EQ(memory.total, 64 * kMiB);
  EXPECT_EQ(memory.used, 18 * kMiB);  // 5 allocated + 3 context + 10 of the other process
  EXPECT_EQ(memory.free, 46 * kMiB);
  unsigned count = 1;
  Process listed[2] = {};
  EXPECT_EQ(processes(device, &count, listed), 7);  // NVML_ERROR_INSUFFICIENT_SIZE: two are listed
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(processes(device, &count, listed), 0);
  EXPECT_EQ(listed[0].pid, static_cast<unsigned>(getpid()));
  EXPECT_EQ(listed[0].used, 8 * kMiB);
  EXPECT_EQ(listed[1].pid, 1u);
  EXPECT_EQ(listed[1].used, 10 * kMiB);
  ASSERT_EQ(cuMemFree(block), CUDA_SUCCESS);
  unsetenv("FAKENVML_CONTEXT_BYTES");
  unsetenv("FAKENVML_OTHER_PROCESS_BYTES");
}

}  // namespace
