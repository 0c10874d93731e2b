// The interposed CUDA memory entry points (runtime, driver, and PyTorch's allocator hook). Each wrapper
// forwards to the real function and, if it is the outermost hook on this thread, records what happened.
// Wrappers never call a public CUDA entry point: only the real pointers stored in g_hooks.
#include <dlfcn.h>

#include "hooks_internal.h"
#include "device_usage.h"
#include "pool_sampler.h"
#include "recorder.h"
#include "tls.h"

#define MEMTRACE_EXPORT __attribute__((visibility("default")))


namespace memtrace {
namespace {

template <typename Fn>
Fn real_fn(HookId id, HookPath path) {
  return reinterpret_cast<Fn>(hook_real(id, path));
}

// One successful or failed allocation. A failure because memory ran out is an OOM event carrying the
// request and the device's free/total memory at that moment; other failures are not memory events.
void on_alloc(Api api, Layer layer, bool ok, bool out_of_memory, uint64_t address, uint64_t size,
              uint64_t stream, int device, int result) {
  if (!ok && !out_of_memory) return;
  MemoryEvent e{.kind = ok ? EventKind::kAlloc : EventKind::kOom, .layer = layer, .api = api, .device = device,
                .stream = stream, .address = ok ? address : 0, .size = size, .result = result};
  if (!ok) device_memory_info(&e.device_free_bytes, &e.device_total_bytes);
  record_event(e);
}

// The device and size of a free are those of the allocation it frees: the analyzer takes them from there,
// so a block freed while another device is current is still charged to its own.
void on_free(Api api, Layer layer, uint64_t address, uint64_t stream, int result) {
  if (address == 0) return;  // cudaFree(nullptr) is the classic "create the context" call
  record_event({.kind = EventKind::kFree, .layer = layer, .api = api, .stream = stream, .address = address,
                .result = result});
}

// A free that succeeded, or that came after the driver or runtime shut down at process exit (the memory
// went with the context): both are frees. The second is recorded with its result, as a teardown free.
bool freed(int result) {
  static_assert(CUDA_ERROR_DEINITIALIZED == 4 && cudaErrorCudartUnloading == 4, "teardown result in memtrace.proto");
  return result == 0 || result == CUDA_ERROR_DEINITIALIZED;
}

// A free, recorded so that the trace keeps each address's free before its next allocation. While the job
// runs, that means recording it BEFORE the real call: once the driver has the memory back it can hand the
// same address to another thread, whose allocation (recorded after its call returns) would otherwise come
// first. Once the process is exiting there is no such race, and the free is recorded after the call with its
// result: a free answered with CUDA_ERROR_DEINITIALIZED is a teardown free. (A free that fails for another
// reason while the job runs is still recorded as a free; the driver only fails those on bad pointers.)
class FreeEvent {
 public:
  FreeEvent(const HookScope& scope, Api api, Layer layer, uint64_t address, uint64_t stream)
      : api_(api), layer_(layer), address_(address), stream_(stream),
        deferred_(scope.outermost() && recorder_exit_begun()) {
    if (scope.outermost() && !deferred_) on_free(api_, layer_, address_, stream_, 0);
  }
  void done(int result) const {
    if (deferred_ && freed(result)) on_free(api_, layer_, address_, stream_, result);
  }

 private:
  Api api_;
  Layer layer_;
  uint64_t address_;
  uint64_t stream_;
  bool deferred_;
};

void on_other(EventKind kind, Api api, uint64_t address, uint64_t size, uint64_t handle) {
  record_event({.kind = kind, .layer = Layer::kDriver, .api = api, .address = address, .size = size,
                .handle = handle});
}

// An explicit pool may belong to any device, whichever is current: ask the driver whose the block is.
// (Plain stream-ordered allocations come from the current device's pool and need no extra driver call.)
int pool_block_device(bool ok, uint64_t address) {
  int current = current_device();
  return ok ? device_of_pointer(address, current) : current;
}

uint64_t ptr_value(const void* p) { return reinterpret_cast<uintptr_t>(p); }
uint64_t stream_value(const void* s) { return reinterpret_cast<uintptr_t>(s); }

constexpr int kRuntimeOom = cudaErrorMemoryAllocation;
constexpr int kDriverOom = CUDA_ERROR_OUT_OF_MEMORY;


}  // namespace
}  // namespace memtrace

using namespace memtrace;

// Forwards and returns early when the real function cannot be found (no CUDA library loaded).
#define MEMTRACE_FORWARD_OR(symbol, error)                                        \
  auto real = real_fn<decltype(&symbol)>(kHook_##symbol, take_hook_path());       \
  if (!real) return error;                                                        \
  HookScope scope

// ---- CUDA runtime ----------------------------------------------------------------------------------------

MEMTRACE_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
  MEMTRACE_FORWARD_OR(cudaMalloc, cudaErrorInitializationError);
  cudaError_t r = real(devPtr, size);
  if (scope.outermost())
    on_alloc(Api::kCudaMalloc, Layer::kDriver, r == cudaSuccess, r == kRuntimeOom, devPtr ? ptr_value(*devPtr) : 0,
             size, 0, current_device(), r);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaFree(void* devPtr) {
  MEMTRACE_FORWARD_OR(cudaFree, cudaErrorInitializationError);
  FreeEvent event(scope, Api::kCudaFree, Layer::kDriver, ptr_value(devPtr), 0);
  cudaError_t r = real(devPtr);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  MEMTRACE_FORWARD_OR(cudaMallocPitch, cudaErrorInitializationError);
  cudaError_t r = real(devPtr, pitch, width, height);
  if (scope.outermost()) {
    bool ok = r == cudaSuccess;
    on_alloc(Api::kCudaMallocPitch, Layer::kDriver, ok, r == kRuntimeOom, ok ? ptr_value(*devPtr) : 0,
             ok ? *pitch * height : width * height, 0, current_device(), r);
  }
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  MEMTRACE_FORWARD_OR(cudaMallocManaged, cudaErrorInitializationError);
  cudaError_t r = real(devPtr, size, flags);
  if (scope.outermost())
    on_alloc(Api::kCudaMallocManaged, Layer::kDriver, r == cudaSuccess, r == kRuntimeOom,
             devPtr ? ptr_value(*devPtr) : 0, size, 0, current_device(), r);
  return r;
}

// Stream-ordered allocations are blocks of the device's memory pool: LAYER_BLOCK (see memtrace.proto).
#define MEMTRACE_RUNTIME_MALLOC_ASYNC(symbol)                                                                \
  MEMTRACE_EXPORT cudaError_t symbol(void** devPtr, size_t size, cudaStream_t stream) {                     \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real(devPtr, size, stream);                                                             \
    if (scope.outermost())                                                                                  \
      on_alloc(Api::kCudaMallocAsync, Layer::kBlock, r == cudaSuccess, r == kRuntimeOom,                    \
               devPtr ? ptr_value(*devPtr) : 0, size, stream_value(stream), current_device(), r);           \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_MALLOC_ASYNC(cudaMallocAsync)
MEMTRACE_RUNTIME_MALLOC_ASYNC(cudaMallocAsync_ptsz)

#define MEMTRACE_RUNTIME_FREE_ASYNC(symbol)                                                                  \
  MEMTRACE_EXPORT cudaError_t symbol(void* devPtr, cudaStream_t stream) {                                   \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    FreeEvent event(scope, Api::kCudaFreeAsync, Layer::kBlock, ptr_value(devPtr), stream_value(stream));   \
    cudaError_t r = real(devPtr, stream);                                                                   \
    event.done(r);                                                                                          \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_FREE_ASYNC(cudaFreeAsync)
MEMTRACE_RUNTIME_FREE_ASYNC(cudaFreeAsync_ptsz)

#define MEMTRACE_RUNTIME_MALLOC_FROM_POOL(symbol)                                                            \
  MEMTRACE_EXPORT cudaError_t symbol(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {    \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real(ptr, size, pool, stream);                                                          \
    if (scope.outermost())                                                                                  \
      on_alloc(Api::kCudaMallocFromPoolAsync, Layer::kBlock, r == cudaSuccess, r == kRuntimeOom,            \
               ptr ? ptr_value(*ptr) : 0, size, stream_value(stream), pool_block_device(r == cudaSuccess, ptr ? ptr_value(*ptr) : 0), r); \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_MALLOC_FROM_POOL(cudaMallocFromPoolAsync)
MEMTRACE_RUNTIME_MALLOC_FROM_POOL(cudaMallocFromPoolAsync_ptsz)

// ---- CUDA driver -----------------------------------------------------------------------------------------

MEMTRACE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  MEMTRACE_FORWARD_OR(cuMemAlloc_v2, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(dptr, bytesize);
  if (scope.outermost())
    on_alloc(Api::kCuMemAlloc, Layer::kDriver, r == CUDA_SUCCESS, r == kDriverOom, dptr ? *dptr : 0, bytesize, 0,
             current_device(), r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                           unsigned int elementSizeBytes) {
  MEMTRACE_FORWARD_OR(cuMemAllocPitch_v2, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(dptr, pitch, width, height, elementSizeBytes);
  if (scope.outermost()) {
    bool ok = r == CUDA_SUCCESS;
    on_alloc(Api::kCuMemAllocPitch, Layer::kDriver, ok, r == kDriverOom, ok ? *dptr : 0,
             ok ? *pitch * height : width * height, 0, current_device(), r);
  }
  return r;
}

MEMTRACE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  MEMTRACE_FORWARD_OR(cuMemFree_v2, CUDA_ERROR_NOT_INITIALIZED);
  FreeEvent event(scope, Api::kCuMemFree, Layer::kDriver, dptr, 0);
  CUresult r = real(dptr);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  MEMTRACE_FORWARD_OR(cuMemAllocManaged, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(dptr, bytesize, flags);
  if (scope.outermost())
    on_alloc(Api::kCuMemAllocManaged, Layer::kDriver, r == CUDA_SUCCESS, r == kDriverOom, dptr ? *dptr : 0,
             bytesize, 0, current_device(), r);
  return r;
}

#define MEMTRACE_DRIVER_ALLOC_ASYNC(symbol)                                                                  \
  MEMTRACE_EXPORT CUresult symbol(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {                    \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real(dptr, bytesize, stream);                                                              \
    if (scope.outermost())                                                                                  \
      on_alloc(Api::kCuMemAllocAsync, Layer::kBlock, r == CUDA_SUCCESS, r == kDriverOom, dptr ? *dptr : 0,  \
               bytesize, stream_value(stream), current_device(), r);                                        \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_ALLOC_ASYNC(cuMemAllocAsync)
MEMTRACE_DRIVER_ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define MEMTRACE_DRIVER_ALLOC_FROM_POOL(symbol)                                                              \
  MEMTRACE_EXPORT CUresult symbol(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) { \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real(dptr, bytesize, pool, stream);                                                        \
    if (scope.outermost())                                                                                  \
      on_alloc(Api::kCuMemAllocFromPoolAsync, Layer::kBlock, r == CUDA_SUCCESS, r == kDriverOom,            \
               dptr ? *dptr : 0, bytesize, stream_value(stream), pool_block_device(r == CUDA_SUCCESS, dptr ? *dptr : 0), r); \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync)
MEMTRACE_DRIVER_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz)

#define MEMTRACE_DRIVER_FREE_ASYNC(symbol)                                                                   \
  MEMTRACE_EXPORT CUresult symbol(CUdeviceptr dptr, CUstream stream) {                                      \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    FreeEvent event(scope, Api::kCuMemFreeAsync, Layer::kBlock, dptr, stream_value(stream));               \
    CUresult r = real(dptr, stream);                                                                        \
    event.done(r);                                                                                          \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_FREE_ASYNC(cuMemFreeAsync)
MEMTRACE_DRIVER_FREE_ASYNC(cuMemFreeAsync_ptsz)

// Virtual memory management. cuMemCreate is physical memory (keyed by its handle); map/unmap and address
// reservations are recorded for the analyzer but are not memory of their own.
MEMTRACE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  MEMTRACE_FORWARD_OR(cuMemCreate, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(handle, size, prop, flags);
  if (scope.outermost()) {
    int device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    on_alloc(Api::kCuMemCreate, Layer::kDriver, r == CUDA_SUCCESS, r == kDriverOom, handle ? *handle : 0, size, 0,
             device, r);
  }
  return r;
}

MEMTRACE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  MEMTRACE_FORWARD_OR(cuMemRelease, CUDA_ERROR_NOT_INITIALIZED);
  FreeEvent event(scope, Api::kCuMemRelease, Layer::kDriver, handle, 0);
  CUresult r = real(handle);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                  unsigned long long flags) {
  MEMTRACE_FORWARD_OR(cuMemMap, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(ptr, size, offset, handle, flags);
  if (scope.outermost() && r == CUDA_SUCCESS) on_other(EventKind::kMap, Api::kCuMemMap, ptr, size, handle);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  MEMTRACE_FORWARD_OR(cuMemUnmap, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(ptr, size);
  if (scope.outermost() && r == CUDA_SUCCESS) on_other(EventKind::kUnmap, Api::kCuMemUnmap, ptr, size, 0);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                             unsigned long long flags) {
  MEMTRACE_FORWARD_OR(cuMemAddressReserve, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(ptr, size, alignment, addr, flags);
  if (scope.outermost() && r == CUDA_SUCCESS)
    on_other(EventKind::kAddressReserve, Api::kCuMemAddressReserve, *ptr, size, 0);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  MEMTRACE_FORWARD_OR(cuMemAddressFree, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(ptr, size);
  if (scope.outermost() && r == CUDA_SUCCESS)
    on_other(EventKind::kAddressFree, Api::kCuMemAddressFree, ptr, size, 0);
  return r;
}

// ---- PyTorch's caching allocator -------------------------------------------------------------------------
// libc10_cuda.so calls c10::reportMemoryUsageToProfiler on every block allocation (+size) and free (-size)
// of the native caching allocator (default and expandable segments), with PyTorch's own allocated and
// reserved totals after the change, whether or not a profiler runs (c10/core/Allocator.cpp; measured on
// torch 2.11). Our definition is found first; we record, then forward to libc10.so's own so that
// torch.profiler still gets its memory events. libc10.so is loaded RTLD_LOCAL by Python, where
// dlsym(RTLD_NEXT) finds nothing: it is looked up on its own handle.
namespace c10 {
// The ABI of c10::Device (c10/core/Device.h): DeviceType (int8_t enum) and DeviceIndex (int8_t), passed by
// value in one register.
struct Device {
  int8_t type;
  int8_t index;
};
// c10::DeviceType::CUDA (c10/core/DeviceType.h). PyTorch's CPU allocators report through the same hook
// (shared-memory tensors of DataLoader workers do, profiling or not): host memory, never recorded, and no
// reason to start a trace in a process that never touches CUDA.
constexpr int8_t kCudaDeviceType = 1;

namespace {
// The real hook in libc10.so, looked up once (a miss is remembered too: no dlopen on every call).
template <typename Fn>
Fn real_c10(const char* symbol, std::atomic<void*>& cache) {
  static void* const kMissing = reinterpret_cast<void*>(&real_c10<Fn>);
  void* fn = cache.load(std::memory_order_acquire);
  if (fn == kMissing) return nullptr;
  if (!fn) {
    void* handle = dlopen("libc10.so", RTLD_NOLOAD | RTLD_LAZY);
    if (handle) {
      fn = real_dlsym(handle, symbol);
      dlclose(handle);
    }
    cache.store(fn ? fn : kMissing, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}
std::atomic<void*> g_real_report_usage{nullptr};
std::atomic<void*> g_real_report_oom{nullptr};
}  // namespace

MEMTRACE_EXPORT void reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size, size_t total_allocated,
                                                 size_t total_reserved, Device device) {
  {
    HookScope scope;
    if (scope.outermost() && alloc_size != 0 && device.type == kCudaDeviceType) {
      record_event({.kind = alloc_size > 0 ? EventKind::kAlloc : EventKind::kFree,
                    .layer = Layer::kBlock,
                    .api = Api::kTorchAllocator,
                    .device = device.index,
                    .address = ptr_value(ptr),
                    .size = static_cast<uint64_t>(alloc_size > 0 ? alloc_size : -alloc_size),
                    .allocator_allocated_bytes = total_allocated,
                    .allocator_reserved_bytes = total_reserved});
    }
  }
  using Fn = void (*)(void*, int64_t, size_t, size_t, Device);
  if (Fn real = real_c10<Fn>("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE", g_real_report_usage))
    real(ptr, alloc_size, total_allocated, total_reserved, device);
}

MEMTRACE_EXPORT void reportOutOfMemoryToProfiler(int64_t alloc_size, size_t total_allocated, size_t total_reserved,
                                                 Device device) {
  {
    HookScope scope;
    if (scope.outermost() && device.type == kCudaDeviceType) {
      MemoryEvent e{.kind = EventKind::kOom,
                    .layer = Layer::kBlock,
                    .api = Api::kTorchAllocator,
                    .device = device.index,
                    .size = static_cast<uint64_t>(alloc_size),
                    .allocator_allocated_bytes = total_allocated,
                    .allocator_reserved_bytes = total_reserved};
      device_memory_info(&e.device_free_bytes, &e.device_total_bytes);
      record_event(e);
    }
  }
  using Fn = void (*)(int64_t, size_t, size_t, Device);
  if (Fn real = real_c10<Fn>("_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE", g_real_report_oom))
    real(alloc_size, total_allocated, total_reserved, device);
}
}  // namespace c10

// ---- the handed-out entry points and the table -------------------------------------------------------------
// Each hook's hidden alias (memtrace_own_<symbol>) is our own definition, whatever another preloaded library
// defines under the same name; the handed-out entry point marks the path and calls it.

#define MEMTRACE_SAMPLING_HOOKS_ELSEWHERE  // sync_hooks.cc makes those aliases, next to their definitions
#define MEMTRACE_RUNTIME_HOOK(symbol) \
  extern "C" decltype(::symbol) memtrace_own_##symbol __attribute__((alias(#symbol), visibility("hidden")));
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) MEMTRACE_RUNTIME_HOOK(symbol)
#include "hooks.def"
#undef MEMTRACE_SAMPLING_HOOKS_ELSEWHERE
// The aliases sync_hooks.cc defines, declared for the table below. Only those: GCC refuses a second
// declaration of a function whose type came with default arguments (decltype of cudaMallocManaged...).
#define MEMTRACE_SAMPLING_HOOKS_ONLY
#define MEMTRACE_RUNTIME_HOOK(symbol) \
  extern "C" decltype(::symbol) memtrace_own_##symbol __attribute__((visibility("hidden")));
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) MEMTRACE_RUNTIME_HOOK(symbol)
#include "hooks.def"
#undef MEMTRACE_SAMPLING_HOOKS_ONLY

namespace memtrace {
namespace {

MEMTRACE_TLS HookPath t_hook_path = HookPath::kExported;

template <auto* Own, typename Fn>
struct HandedOut;
template <auto* Own, typename R, typename... Args>
struct HandedOut<Own, R(Args...)> {
  static R call(Args... args) {
    t_hook_path = HookPath::kHandedOut;
    return Own(args...);
  }
};

}  // namespace

HookPath take_hook_path() {
  HookPath path = t_hook_path;
  t_hook_path = HookPath::kExported;  // hooks nested in the real call are entered afresh
  return path;
}

HookSlot g_hooks[kHookCount] = {
#define MEMTRACE_RUNTIME_HOOK(symbol)                                                                    \
  {#symbol, nullptr, 0, false,                                                                           \
   reinterpret_cast<void*>(&HandedOut<&memtrace_own_##symbol, decltype(::symbol)>::call), {nullptr}, {nullptr}},
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream)                           \
  {#symbol, base_name, min_version, per_thread_stream,                                                    \
   reinterpret_cast<void*>(&HandedOut<&memtrace_own_##symbol, decltype(::symbol)>::call), {nullptr}, {nullptr}},
#include "hooks.def"
};
}  // namespace memtrace
