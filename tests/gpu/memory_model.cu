// Every accounting rule of memtrace's memory model on one GPU, with known sizes, for scripts/gpu-check.
//
//   memory_model --truth TRUTH_JSON [--ipc-child-truth CHILD_JSON]
//
// Built three ways by gpu-check: default static cudart and `-cudart shared` (driver calls through
// cudaGetDriverEntryPointByVersion, the path PyTorch takes for its VMM calls), and with -lcuda and
// -DMEMORY_MODEL_DIRECT_DRIVER (driver calls bound to the exported cu* symbols).
//
// Phases on device 0, each ending at a checkpoint (device synchronized, CLOCK_MONOTONIC read, the pools'
// reserved memory read from the driver):
//   A  pools     cudaMallocAsync x2 on the default pool, a user pool (release threshold UINT64_MAX) with
//                cudaMallocFromPoolAsync, frees, cudaMemPoolTrimTo(0), the default pool released at a sync
//   B  VMM       cuMemAddressReserve of 8 granules, one 3-granule cuMemCreate mapped at two addresses,
//                cuMemRelease before the two cuMemUnmap; a cuMemCreate with a host NUMA location if supported
//   C  host      cudaMallocManaged; cudaMallocHost, cudaHostAlloc, cuMemAllocHost, cudaHostRegister
//   D  arrays    cudaMallocArray (size: cuArrayGetMemoryRequirements, else its elements' bytes), cudaMalloc3D
//                (pitch * height * depth)
//   E  graphs    a captured cudaMallocAsync/cudaFreeAsync launched twice; a graph built with
//                cudaGraphAddMemAllocNode launched once, its memory freed by a second graph's free node;
//                cudaDeviceGraphMemTrim
//   F  IPC       a cudaMalloc exported with cudaIpcGetMemHandle; this program re-executed as a child opens it
//                (the child's trace is its own: MEMTRACE_OUTPUT is set to CHILD_JSON's name with .mtrace)
//   G  teardown  cuCtxCreate, cuMemAlloc + cuMemCreate in it, cuCtxDestroy, cuMemRelease of the handle after;
//                cuMemGetInfo before and after shows what the driver freed with the context
//   end          cudaDeviceReset
// A "survivor" cudaMalloc of the primary context stays live from A to the end: cuCtxDestroy of another
// context must not free it (the driver does not).
//
// TRUTH_JSON holds, at each checkpoint, the figures memtrace's timeline must show for device 0 under the
// rules of its memory model (written out in Tally below), the category peaks and finals its summary must
// show, and the driver's own readings (pool reserved, array size, cuMemGetInfo) that those figures use.
#include <cuda.h>
#include <cuda_runtime.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr size_t kMiB = 1024 * 1024;

// Sizes are distinct and not round, so that a wrong pairing or a wrong category shows.
constexpr size_t kSurvivorBytes = 2 * kMiB + 40;         // primary-context cudaMalloc, live A..end
constexpr size_t kAsync1Bytes = 5 * kMiB + 1000;          // default pool
constexpr size_t kAsync2Bytes = 9 * kMiB + 24;            // default pool
constexpr size_t kUserPoolBytes = 7 * kMiB + 512;         // user pool
constexpr size_t kManagedBytes = 6 * kMiB + 200;
constexpr size_t kMallocHostBytes = 3 * kMiB + 100;
constexpr size_t kHostAllocBytes = 5 * kMiB + 300;
constexpr size_t kCuMemAllocHostBytes = 1 * kMiB + 50;
constexpr size_t kRegisteredBytes = 4 * kMiB + 3 * 4096;  // page multiple: cudaHostRegister pins whole pages
constexpr size_t kArrayWidth = 4000, kArrayHeight = 3000;  // float elements: 48,000,000 B of elements
constexpr size_t k3dWidthBytes = 1000, k3dHeight = 300, k3dDepth = 7;
constexpr size_t kCapturedBytes = 3 * kMiB + 8;           // cudaMallocAsync inside a stream capture
constexpr size_t kGraphNodeBytes = 6 * kMiB + 64;         // cudaGraphAddMemAllocNode
constexpr size_t kIpcBytes = 4 * kMiB;
constexpr size_t kTeardownAllocBytes = 64 * kMiB;         // cuMemAlloc in the created context
constexpr size_t kTeardownGranules = 8;                   // cuMemCreate in the created context

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "memory_model: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

void check(CUresult res, const char* what) {
  if (res != CUDA_SUCCESS) {
    // The number only: the build without -lcuda has no cuGetErrorName to call.
    std::fprintf(stderr, "memory_model: %s failed: CUresult %d\n", what, static_cast<int>(res));
    std::exit(1);
  }
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The driver functions used, either bound at link time (-lcuda, exported cu* symbols) or looked up through
// the runtime (cudaGetDriverEntryPointByVersion at CUDA 13.0, which gives the versions cuda.h declares).
struct Driver {
  decltype(&::cuMemGetAllocationGranularity) cuMemGetAllocationGranularity;
  decltype(&::cuMemCreate) cuMemCreate;
  decltype(&::cuMemRelease) cuMemRelease;
  decltype(&::cuMemAddressReserve) cuMemAddressReserve;
  decltype(&::cuMemAddressFree) cuMemAddressFree;
  decltype(&::cuMemMap) cuMemMap;
  decltype(&::cuMemUnmap) cuMemUnmap;
  decltype(&::cuMemSetAccess) cuMemSetAccess;
  decltype(&::cuMemAllocHost) cuMemAllocHost;
  decltype(&::cuMemFreeHost) cuMemFreeHost;
  decltype(&::cuArrayGetMemoryRequirements) cuArrayGetMemoryRequirements;
  decltype(&::cuMemGetAddressRange) cuMemGetAddressRange;
  decltype(&::cuMemGetInfo) cuMemGetInfo;
  decltype(&::cuCtxCreate) cuCtxCreate;
  decltype(&::cuCtxDestroy) cuCtxDestroy;
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent;
  decltype(&::cuMemAlloc) cuMemAlloc;
  decltype(&::cuMemsetD8) cuMemsetD8;
  decltype(&::cuCtxSynchronize) cuCtxSynchronize;
};

#ifdef MEMORY_MODEL_DIRECT_DRIVER
#define MEMORY_MODEL_LOAD(d, name) (d).name = &::name  // cuda.h's macros pick the _v2 / _v4 symbol
const char* kDriverPath = "-lcuda (exported symbols)";
#else
#define MEMORY_MODEL_LOAD(d, name) \
  (d).name = reinterpret_cast<decltype((d).name)>(entry_point(#name, abi_version(#name)))
const char* kDriverPath = "cudaGetDriverEntryPointByVersion";

// The CUDA version whose ABI of `name` matches the declaration used in Driver: 13000 (cuda.h's own) except
// cuCtxSynchronize, which at 13000 is cuCtxSynchronize_v2(CUcontext) while Driver calls the argument-less one.
unsigned abi_version(const char* name) { return std::strcmp(name, "cuCtxSynchronize") == 0 ? 12000 : 13000; }

void* entry_point(const char* name, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  check(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &status), name);
  if (status != cudaDriverEntryPointSuccess || fn == nullptr) {
    std::fprintf(stderr, "memory_model: no driver entry point %s (status %d)\n", name, int(status));
    std::exit(1);
  }
  return fn;
}
#endif

Driver load_driver() {
  Driver d{};
  MEMORY_MODEL_LOAD(d, cuMemGetAllocationGranularity);
  MEMORY_MODEL_LOAD(d, cuMemCreate);
  MEMORY_MODEL_LOAD(d, cuMemRelease);
  MEMORY_MODEL_LOAD(d, cuMemAddressReserve);
  MEMORY_MODEL_LOAD(d, cuMemAddressFree);
  MEMORY_MODEL_LOAD(d, cuMemMap);
  MEMORY_MODEL_LOAD(d, cuMemUnmap);
  MEMORY_MODEL_LOAD(d, cuMemSetAccess);
  MEMORY_MODEL_LOAD(d, cuMemAllocHost);
  MEMORY_MODEL_LOAD(d, cuMemFreeHost);
  MEMORY_MODEL_LOAD(d, cuArrayGetMemoryRequirements);
  MEMORY_MODEL_LOAD(d, cuMemGetAddressRange);
  MEMORY_MODEL_LOAD(d, cuMemGetInfo);
  MEMORY_MODEL_LOAD(d, cuCtxCreate);
  MEMORY_MODEL_LOAD(d, cuCtxDestroy);
  MEMORY_MODEL_LOAD(d, cuCtxGetCurrent);
  MEMORY_MODEL_LOAD(d, cuCtxSetCurrent);
  MEMORY_MODEL_LOAD(d, cuMemAlloc);
  MEMORY_MODEL_LOAD(d, cuMemsetD8);
  MEMORY_MODEL_LOAD(d, cuCtxSynchronize);
  return d;
}

// One category's live bytes and the highest value they reached.
struct Gauge {
  size_t live = 0;
  size_t peak = 0;
  void add(size_t n) { live += n; peak = std::max(peak, live); }
  void sub(size_t n) { live -= n; }
};

// What memtrace must compute for device 0, following issue 4's rules:
//   allocated = live pool blocks + live graph allocations (the device has a block layer from phase A on, so
//               driver-layer allocations are not "allocated")
//   reserved  = driver-layer device bytes (cudaMalloc, cudaMalloc3D, cuMemAlloc, cuMemCreate on the device from
//               create to the later of release and last unmap) + CUDA arrays (device memory) + each pool's
//               latest reserved sample (default, user, graph pool)
//   driver    = the same as reserved here: no PyTorch layer, every byte the process holds from the driver
// Managed memory is charged to no device; host memory never is. Each has its category, as arrays do.
// Graph memory (the category) is what the graph memory pool holds: its reserved memory, or the live graph
// allocations where those are more.
struct Tally {
  Gauge blocks, driver_layer, vmm_device, managed, pinned, registered, arrays, address_space, graph;
  size_t default_pool_reserved = 0, user_pool_reserved = 0, graph_pool_reserved = 0;
  size_t peak_reserved = 0, peak_graph_pool_reserved = 0, peak_pools_reserved = 0;
  size_t reserved() const {
    return driver_layer.live + vmm_device.live + arrays.live + default_pool_reserved + user_pool_reserved +
           graph_pool_reserved;
  }
};

struct Program {
  Driver drv;
  Tally t;
  std::string checkpoints_json;  // JSON objects, comma-separated
  std::string facts_json;        // "key": value pairs of driver readings, comma-separated
  cudaStream_t stream = nullptr;
  cudaMemPool_t default_pool = nullptr, user_pool = nullptr;
  void* survivor = nullptr;  // the primary context's cudaMalloc, live from the start to cudaDeviceReset

  size_t pool_reserved(cudaMemPool_t pool) {
    cuuint64_t v = 0;
    check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v), "cudaMemPoolGetAttribute");
    return size_t(v);
  }
  size_t graph_reserved() {
    cuuint64_t v = 0;
    check(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &v),
          "cudaDeviceGetGraphMemAttribute");
    return size_t(v);
  }

  void fact(const char* key, long long value) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s\"%s\": %lld", facts_json.empty() ? "" : ", ", key, value);
    facts_json += buf;
  }

  // Synchronizes (the tracer samples pools there), reads the pools' reserved memory, and records what
  // memtrace's timeline must show at this moment.
  void checkpoint(const char* name) {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    t.default_pool_reserved = pool_reserved(default_pool);
    t.user_pool_reserved = user_pool ? pool_reserved(user_pool) : 0;
    // A pool's live blocks lie inside its reserved memory: where the driver reports less (or nothing yet), the
    // blocks stand in for it, as in memtrace's rule.
    t.graph_pool_reserved = std::max(graph_reserved(), t.graph.live);
    t.peak_reserved = std::max(t.peak_reserved, t.reserved());
    t.peak_graph_pool_reserved = std::max(t.peak_graph_pool_reserved, t.graph_pool_reserved);
    t.peak_pools_reserved =
        std::max(t.peak_pools_reserved, t.default_pool_reserved + t.user_pool_reserved + t.graph_pool_reserved);
    const uint64_t now = monotonic_ns();
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "%s\n  {\"name\": \"%s\", \"monotonic_ns\": %" PRIu64 ", "
                  "\"allocated_bytes\": %zu, \"reserved_bytes\": %zu, \"driver_bytes\": %zu, "
                  "\"default_pool_reserved_bytes\": %zu, \"user_pool_reserved_bytes\": %zu, "
                  "\"graph_pool_reserved_bytes\": %zu, \"vmm_bytes\": %zu, \"address_space_bytes\": %zu, "
                  "\"managed_bytes\": %zu, \"host_pinned_bytes\": %zu, \"host_registered_bytes\": %zu, "
                  "\"array_bytes\": %zu}",
                  checkpoints_json.empty() ? "" : ",", name, now, t.blocks.live,
                  t.reserved(), t.reserved(), t.default_pool_reserved, t.user_pool_reserved,
                  t.graph_pool_reserved, t.vmm_device.live, t.address_space.live, t.managed.live, t.pinned.live,
                  t.registered.live, t.arrays.live);
    checkpoints_json += buf;
    std::printf("checkpoint %-22s allocated %zu reserved %zu (pools: default %zu user %zu graph %zu)\n", name,
                t.blocks.live, t.reserved(), t.default_pool_reserved, t.user_pool_reserved, t.graph_pool_reserved);
  }

  void pools();
  void vmm();
  void host_and_managed();
  void arrays();
  void graphs();
  void ipc(const char* self, const char* child_truth);
  void teardown();
};

void Program::pools() {
  check(cudaDeviceGetDefaultMemPool(&default_pool, 0), "cudaDeviceGetDefaultMemPool");
  void *a1, *a2, *b1;
  check(cudaMallocAsync(&a1, kAsync1Bytes, stream), "cudaMallocAsync");
  check(cudaMallocAsync(&a2, kAsync2Bytes, stream), "cudaMallocAsync");
  t.blocks.add(kAsync1Bytes);
  t.blocks.add(kAsync2Bytes);

  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  check(cudaMemPoolCreate(&user_pool, &props), "cudaMemPoolCreate");
  // Keep freed memory in the pool at synchronizations: only cudaMemPoolTrimTo gives it back.
  cuuint64_t keep_all = UINT64_MAX;
  check(cudaMemPoolSetAttribute(user_pool, cudaMemPoolAttrReleaseThreshold, &keep_all), "cudaMemPoolSetAttribute");
  check(cudaMallocFromPoolAsync(&b1, kUserPoolBytes, user_pool, stream), "cudaMallocFromPoolAsync");
  t.blocks.add(kUserPoolBytes);
  check(cudaMemsetAsync(b1, 1, kUserPoolBytes, stream), "cudaMemsetAsync");
  checkpoint("A1 pool blocks live");
  fact("user_pool_reserved_with_block_bytes", (long long)t.user_pool_reserved);
  fact("default_pool_reserved_with_blocks_bytes", (long long)t.default_pool_reserved);

  check(cudaFreeAsync(b1, stream), "cudaFreeAsync");
  t.blocks.sub(kUserPoolBytes);
  checkpoint("A2 user pool keeps");

  check(cudaMemPoolTrimTo(user_pool, 0), "cudaMemPoolTrimTo");
  checkpoint("A3 user pool trimmed");

  check(cudaFreeAsync(a1, stream), "cudaFreeAsync");
  check(cudaFreeAsync(a2, stream), "cudaFreeAsync");
  t.blocks.sub(kAsync1Bytes);
  t.blocks.sub(kAsync2Bytes);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // the default pool (threshold 0) releases here
  checkpoint("A4 default pool freed");

  check(cudaMemPoolDestroy(user_pool), "cudaMemPoolDestroy");
  user_pool = nullptr;
  checkpoint("A5 user pool destroyed");
}

void Program::vmm() {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t g = 0;
  check(drv.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity");
  fact("granularity_bytes", (long long)g);

  CUdeviceptr va;
  check(drv.cuMemAddressReserve(&va, 8 * g, g, 0, 0), "cuMemAddressReserve");
  t.address_space.add(8 * g);
  CUmemGenericAllocationHandle h;
  check(drv.cuMemCreate(&h, 3 * g, &prop, 0), "cuMemCreate");
  t.vmm_device.add(3 * g);
  check(drv.cuMemMap(va, 3 * g, 0, h, 0), "cuMemMap");
  check(drv.cuMemMap(va + 4 * g, 3 * g, 0, h, 0), "cuMemMap (second address)");
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check(drv.cuMemSetAccess(va, 3 * g, &access, 1), "cuMemSetAccess");
  check(drv.cuMemSetAccess(va + 4 * g, 3 * g, &access, 1), "cuMemSetAccess");
  check(drv.cuMemsetD8(va, 7, 3 * g), "cuMemsetD8");
  checkpoint("B1 handle mapped twice");

  check(drv.cuMemRelease(h), "cuMemRelease");  // still mapped twice: the driver keeps the memory
  checkpoint("B2 released, mapped");
  check(drv.cuMemUnmap(va, 3 * g), "cuMemUnmap");
  checkpoint("B3 one mapping left");
  check(drv.cuMemUnmap(va + 4 * g, 3 * g), "cuMemUnmap");
  t.vmm_device.sub(3 * g);
  checkpoint("B4 last unmap");
  check(drv.cuMemAddressFree(va, 8 * g), "cuMemAddressFree");
  t.address_space.sub(8 * g);

  // Host memory through VMM (CUDA 12.2+ with a driver that supports it); skipped, and said so, where not.
  CUmemAllocationProp host = {};
  host.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  host.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  host.location.id = 0;
  size_t hg = 0;
  CUmemGenericAllocationHandle hh;
  CUresult r = drv.cuMemGetAllocationGranularity(&hg, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r == CUDA_SUCCESS) r = drv.cuMemCreate(&hh, 2 * hg, &host, 0);
  fact("host_numa_cumemcreate_result", (long long)r);
  fact("host_numa_granularity_bytes", (long long)hg);
  if (r == CUDA_SUCCESS) {
    t.pinned.add(2 * hg);
    checkpoint("B5 host cuMemCreate");
    check(drv.cuMemRelease(hh), "cuMemRelease (host)");
    t.pinned.sub(2 * hg);
  }
  checkpoint("B6 no VMM");
}

void Program::host_and_managed() {
  void* m;
  check(cudaMallocManaged(&m, kManagedBytes), "cudaMallocManaged");
  t.managed.add(kManagedBytes);
  check(cudaMemset(m, 3, kManagedBytes), "cudaMemset (managed)");
  checkpoint("C1 managed");  // charged to no device: the device's figures must not move
  check(cudaFree(m), "cudaFree (managed)");
  t.managed.sub(kManagedBytes);

  void *h1, *h2, *h3;
  check(cudaMallocHost(&h1, kMallocHostBytes), "cudaMallocHost");
  t.pinned.add(kMallocHostBytes);
  check(cudaHostAlloc(&h2, kHostAllocBytes, cudaHostAllocPortable), "cudaHostAlloc");
  t.pinned.add(kHostAllocBytes);
  check(drv.cuMemAllocHost(&h3, kCuMemAllocHostBytes), "cuMemAllocHost");
  t.pinned.add(kCuMemAllocHostBytes);
  void* reg = std::aligned_alloc(4096, kRegisteredBytes);
  std::memset(reg, 0, kRegisteredBytes);
  check(cudaHostRegister(reg, kRegisteredBytes, cudaHostRegisterDefault), "cudaHostRegister");
  t.registered.add(kRegisteredBytes);
  checkpoint("C2 host memory live");  // host memory: the device's figures must not move

  check(cudaFreeHost(h1), "cudaFreeHost");
  check(cudaFreeHost(h2), "cudaFreeHost");
  check(drv.cuMemFreeHost(h3), "cuMemFreeHost");
  t.pinned.sub(kMallocHostBytes + kHostAllocBytes + kCuMemAllocHostBytes);
  check(cudaHostUnregister(reg), "cudaHostUnregister");
  t.registered.sub(kRegisteredBytes);
  std::free(reg);
  checkpoint("C3 host memory freed");
}

void Program::arrays() {
  // cuda.h: cuArrayGetMemoryRequirements answers CUDA_ERROR_INVALID_VALUE for an array made without
  // CUDA_ARRAY3D_DEFERRED_MAPPING, i.e. for every array of cudaMallocArray. Its size is then the elements'
  // bytes (width * height * 4 for floats), what a tracer can always learn (cuArray3DGetDescriptor); the
  // driver's own use, from cuMemGetInfo around the allocation, is shown beside it.
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  size_t free_before, free_after, total;
  check(drv.cuMemGetInfo(&free_before, &total), "cuMemGetInfo");
  check(cudaMallocArray(&array, &desc, kArrayWidth, kArrayHeight), "cudaMallocArray");
  check(drv.cuMemGetInfo(&free_after, &total), "cuMemGetInfo");
  CUDA_ARRAY_MEMORY_REQUIREMENTS req = {};
  const CUresult r = drv.cuArrayGetMemoryRequirements(&req, reinterpret_cast<CUarray>(array), 0);
  const size_t element_bytes = kArrayWidth * kArrayHeight * sizeof(float);
  fact("array_requirements_result", (long long)r);
  fact("array_requirements_bytes", r == CUDA_SUCCESS ? (long long)req.size : -1);
  fact("array_element_bytes", (long long)element_bytes);
  fact("array_free_drop_bytes", (long long)free_before - (long long)free_after);
  const size_t array_bytes = r == CUDA_SUCCESS ? req.size : element_bytes;
  t.arrays.add(array_bytes);
  checkpoint("D1 array");
  check(cudaFreeArray(array), "cudaFreeArray");
  t.arrays.sub(array_bytes);

  cudaPitchedPtr pitched;
  check(cudaMalloc3D(&pitched, make_cudaExtent(k3dWidthBytes, k3dHeight, k3dDepth)), "cudaMalloc3D");
  const size_t bytes_3d = pitched.pitch * k3dHeight * k3dDepth;
  fact("malloc3d_pitch_bytes", (long long)pitched.pitch);
  fact("malloc3d_bytes", (long long)bytes_3d);
  t.driver_layer.add(bytes_3d);  // left live until cudaDeviceReset
  checkpoint("D2 cudaMalloc3D");
}

void Program::graphs() {
  // 1. cudaMallocAsync / cudaFreeAsync captured into a graph: memory only while a launch runs.
  cudaStream_t capture;
  check(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaGraph_t captured;
  void* g;
  check(cudaStreamBeginCapture(capture, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  check(cudaMallocAsync(&g, kCapturedBytes, capture), "cudaMallocAsync (captured)");
  check(cudaMemsetAsync(g, 5, kCapturedBytes, capture), "cudaMemsetAsync (captured)");
  check(cudaFreeAsync(g, capture), "cudaFreeAsync (captured)");
  check(cudaStreamEndCapture(capture, &captured), "cudaStreamEndCapture");
  checkpoint("E1 captured, not run");
  cudaGraphExec_t captured_exec;
  check(cudaGraphInstantiate(&captured_exec, captured, 0), "cudaGraphInstantiate");
  for (int launch = 0; launch < 2; ++launch) {
    check(cudaGraphLaunch(captured_exec, stream), "cudaGraphLaunch");
    t.blocks.add(kCapturedBytes);  // live during the launch only
    t.graph.add(kCapturedBytes);
    t.blocks.sub(kCapturedBytes);
    t.graph.sub(kCapturedBytes);
  }
  checkpoint("E2 captured graph ran twice");

  // 2. An allocation node whose memory outlives the launch, freed by a free node of another graph.
  cudaMemAllocNodeParams params = {};
  params.poolProps.allocType = cudaMemAllocationTypePinned;
  params.poolProps.location.type = cudaMemLocationTypeDevice;
  params.poolProps.location.id = 0;
  params.bytesize = kGraphNodeBytes;
  cudaGraph_t alloc_graph, free_graph;
  cudaGraphNode_t alloc_node, free_node;
  check(cudaGraphCreate(&alloc_graph, 0), "cudaGraphCreate");
  check(cudaGraphAddMemAllocNode(&alloc_node, alloc_graph, nullptr, 0, &params), "cudaGraphAddMemAllocNode");
  check(cudaGraphCreate(&free_graph, 0), "cudaGraphCreate");
  check(cudaGraphAddMemFreeNode(&free_node, free_graph, nullptr, 0, params.dptr), "cudaGraphAddMemFreeNode");
  cudaGraphExec_t alloc_exec, free_exec;
  check(cudaGraphInstantiate(&alloc_exec, alloc_graph, 0), "cudaGraphInstantiate");
  check(cudaGraphInstantiate(&free_exec, free_graph, 0), "cudaGraphInstantiate");
  checkpoint("E3 node graphs built");
  check(cudaGraphLaunch(alloc_exec, stream), "cudaGraphLaunch (alloc node)");
  t.blocks.add(kGraphNodeBytes);
  t.graph.add(kGraphNodeBytes);
  checkpoint("E4 alloc node ran");
  check(cudaGraphLaunch(free_exec, stream), "cudaGraphLaunch (free node)");
  t.blocks.sub(kGraphNodeBytes);
  t.graph.sub(kGraphNodeBytes);
  checkpoint("E5 free node ran");
  fact("graph_pool_reserved_before_trim_bytes", (long long)t.graph_pool_reserved);

  check(cudaGraphExecDestroy(captured_exec), "cudaGraphExecDestroy");
  check(cudaGraphExecDestroy(alloc_exec), "cudaGraphExecDestroy");
  check(cudaGraphExecDestroy(free_exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(captured), "cudaGraphDestroy");
  check(cudaGraphDestroy(alloc_graph), "cudaGraphDestroy");
  check(cudaGraphDestroy(free_graph), "cudaGraphDestroy");
  check(cudaDeviceGraphMemTrim(0), "cudaDeviceGraphMemTrim");
  checkpoint("E6 graph memory trimmed");
  check(cudaStreamDestroy(capture), "cudaStreamDestroy");
}

std::string hex(const void* data, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char b = static_cast<const unsigned char*>(data)[i];
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

void Program::ipc(const char* self, const char* child_truth) {
  void* shared;
  check(cudaMalloc(&shared, kIpcBytes), "cudaMalloc (exported)");
  t.driver_layer.add(kIpcBytes);
  check(cudaMemset(shared, 9, kIpcBytes), "cudaMemset");
  cudaIpcMemHandle_t handle;
  check(cudaIpcGetMemHandle(&handle, shared), "cudaIpcGetMemHandle");
  checkpoint("F1 exported");

  // The child traces into a file of its own, named after its side file.
  std::string trace = std::string(child_truth) + ".mtrace";
  std::string handle_hex = hex(&handle, sizeof handle);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "MEMTRACE_OUTPUT=", 16) != 0) env.push_back(*e);
  env.push_back("MEMTRACE_OUTPUT=" + trace);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg_child = "--ipc-child", arg_truth = child_truth;
  char* argv[] = {const_cast<char*>(self), arg_child.data(), handle_hex.data(), arg_truth.data(), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) != 0) {
    std::perror("memory_model: posix_spawn of the IPC child");
    std::exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "memory_model: the IPC child failed (status %d)\n", status);
    std::exit(1);
  }
  check(cudaFree(shared), "cudaFree (exported)");
  t.driver_layer.sub(kIpcBytes);
  checkpoint("F2 child done");
}

// The child of phase F: opens the parent's allocation. It allocates nothing of its own, so its trace must show
// the import (size from the driver's address range) and zero allocated / reserved / driver bytes.
int ipc_child(const char* handle_hex, const char* truth_path) {
  cudaIpcMemHandle_t handle;
  if (std::strlen(handle_hex) != 2 * sizeof handle) return 2;
  for (size_t i = 0; i < sizeof handle; ++i) {
    unsigned v = 0;
    std::sscanf(handle_hex + 2 * i, "%2x", &v);
    reinterpret_cast<unsigned char*>(&handle)[i] = static_cast<unsigned char>(v);
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(nullptr)");  // starts the context before the import
  Driver drv = load_driver();
  void* p;
  check(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  CUdeviceptr base;
  size_t range = 0;
  check(drv.cuMemGetAddressRange(&base, &range, reinterpret_cast<CUdeviceptr>(p)), "cuMemGetAddressRange");
  unsigned char first = 0;
  check(cudaMemcpy(&first, p, 1, cudaMemcpyDeviceToHost), "cudaMemcpy (imported)");
  check(cudaIpcCloseMemHandle(p), "cudaIpcCloseMemHandle");
  FILE* f = std::fopen(truth_path, "w");
  if (!f) {
    std::perror(truth_path);
    return 1;
  }
  std::fprintf(f,
               "{\"device\": 0, \"pid\": %d, \"imported_bytes\": %zu, \"imported_peak_bytes\": %zu, "
               "\"imported_final_bytes\": 0, \"first_byte\": %u, \"peak_allocated_bytes\": 0, "
               "\"peak_reserved_bytes\": 0, \"peak_driver_bytes\": 0}\n",
               int(getpid()), range, range, first);
  std::fclose(f);
  std::printf("ipc child: imported %zu B (first byte %u)\n", range, first);
  return 0;
}

void Program::teardown() {
  CUcontext primary, created;
  check(drv.cuCtxGetCurrent(&primary), "cuCtxGetCurrent");
  size_t f0, f1, f2, f3, f4, total;
  check(drv.cuMemGetInfo(&f0, &total), "cuMemGetInfo");
  CUctxCreateParams create_params = {};  // no execution affinity, no CIG: a plain context
  check(drv.cuCtxCreate(&created, &create_params, 0, 0), "cuCtxCreate");
  check(drv.cuMemGetInfo(&f1, &total), "cuMemGetInfo");
  CUdeviceptr d;
  check(drv.cuMemAlloc(&d, kTeardownAllocBytes), "cuMemAlloc (created context)");
  check(drv.cuMemsetD8(d, 1, kTeardownAllocBytes), "cuMemsetD8");
  t.driver_layer.add(kTeardownAllocBytes);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t g = 0;
  check(drv.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity");
  CUmemGenericAllocationHandle h;
  check(drv.cuMemCreate(&h, kTeardownGranules * g, &prop, 0), "cuMemCreate (created context)");
  t.vmm_device.add(kTeardownGranules * g);
  check(drv.cuCtxSynchronize(), "cuCtxSynchronize");
  check(drv.cuMemGetInfo(&f2, &total), "cuMemGetInfo");
  checkpoint("G1 created context");

  check(drv.cuCtxDestroy(created), "cuCtxDestroy");
  t.driver_layer.sub(kTeardownAllocBytes);  // rule 6: freed with its context; the VMM handle is not
  check(drv.cuCtxSetCurrent(primary), "cuCtxSetCurrent (primary)");
  check(drv.cuMemGetInfo(&f3, &total), "cuMemGetInfo");
  // The primary context's allocation outlives the other context: the driver still knows its range.
  CUdeviceptr survivor_base = 0;
  size_t survivor_range = 0;
  const CUresult survivor_lookup =
      drv.cuMemGetAddressRange(&survivor_base, &survivor_range, reinterpret_cast<CUdeviceptr>(survivor));
  fact("teardown_survivor_range_result", (long long)survivor_lookup);
  fact("teardown_survivor_range_bytes", (long long)survivor_range);
  fact("teardown_survivor_bytes", (long long)kSurvivorBytes);
  checkpoint("G2 context destroyed");

  const CUresult release = drv.cuMemRelease(h);
  if (release == CUDA_SUCCESS) t.vmm_device.sub(kTeardownGranules * g);
  check(drv.cuMemGetInfo(&f4, &total), "cuMemGetInfo");
  checkpoint("G3 handle released");

  // The driver's own account: what creating the context cost, and what destroying it gave back.
  fact("teardown_free_before_create_bytes", (long long)f0);
  fact("teardown_free_after_create_bytes", (long long)f1);
  fact("teardown_free_after_allocations_bytes", (long long)f2);
  fact("teardown_free_after_destroy_bytes", (long long)f3);
  fact("teardown_free_after_release_bytes", (long long)f4);
  fact("teardown_cumemalloc_bytes", (long long)kTeardownAllocBytes);
  fact("teardown_cumemcreate_bytes", (long long)(kTeardownGranules * g));
  fact("teardown_context_bytes", (long long)f0 - (long long)f1);
  fact("teardown_freed_by_destroy_bytes", (long long)f3 - (long long)f2);
  fact("teardown_freed_by_release_bytes", (long long)f4 - (long long)f3);
  fact("teardown_release_result", (long long)release);
  fact("device_total_bytes", (long long)total);
}

void write_truth(const Program& p, const char* path) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::perror(path);
    std::exit(1);
  }
  const Tally& t = p.t;
  std::fprintf(f, "{\"device\": 0, \"driver_path\": \"%s\",\n \"checkpoints\": [%s\n ],\n", kDriverPath,
               p.checkpoints_json.c_str());
  // Categories: the highest value each reached and what is left at exit (after cudaDeviceReset, which frees
  // the survivor and the cudaMalloc3D allocation with the primary context, and the pools with it).
  const size_t graph_peak = std::max(t.graph.peak, t.peak_graph_pool_reserved);
  std::fprintf(f,
               " \"peak_allocated_bytes\": %zu, \"final_allocated_bytes\": 0, \"peak_reserved_bytes\": %zu,\n"
               " \"final_reserved_bytes\": %zu, \"final_driver_bytes\": %zu,\n"
               " \"categories\": {\"managed\": [%zu, 0], \"host_pinned\": [%zu, 0], \"host_registered\": [%zu, 0],\n"
               "   \"array\": [%zu, 0], \"address_space\": [%zu, 0], \"graph\": [%zu, 0],\n"
               "   \"pools_reserved\": [%zu, 0]},\n"
               " \"facts\": {%s}}\n",
               t.blocks.peak, t.peak_reserved, t.vmm_device.live, t.vmm_device.live, t.managed.peak, t.pinned.peak,
               t.registered.peak, t.arrays.peak, t.address_space.peak, graph_peak, t.peak_pools_reserved,
               p.facts_json.c_str());
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--ipc-child") == 0) return ipc_child(argv[2], argv[3]);
  if (argc != 5 || std::strcmp(argv[1], "--truth") != 0 || std::strcmp(argv[3], "--ipc-child-truth") != 0) {
    std::fprintf(stderr, "usage: %s --truth TRUTH_JSON --ipc-child-truth CHILD_JSON\n", argv[0]);
    return 2;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  Program p;
  p.drv = load_driver();
  check(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaMalloc(&p.survivor, kSurvivorBytes), "cudaMalloc (survivor)");
  p.t.driver_layer.add(kSurvivorBytes);

  p.pools();
  p.vmm();
  p.host_and_managed();
  p.arrays();
  p.graphs();
  p.ipc(argv[0], argv[4]);
  p.teardown();

  check(cudaStreamDestroy(p.stream), "cudaStreamDestroy");
  check(cudaDeviceReset(), "cudaDeviceReset");  // frees the survivor and the cudaMalloc3D allocation
  p.t.driver_layer.sub(p.t.driver_layer.live);
  write_truth(p, argv[2]);
  std::printf("memory_model: %s, truth in %s\n", kDriverPath, argv[2]);
  return 0;
}
