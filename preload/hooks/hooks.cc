// The interposed CUDA memory entry points (runtime, driver, and PyTorch's allocator hook). Each wrapper
// forwards to the real function and, if it is the outermost hook on this thread, records what happened.
// Wrappers never call a public CUDA entry point: only the real pointers stored in g_hooks.
#include <dlfcn.h>

#include "hooks/array_bytes.h"
#include "hooks/hooks_internal.h"
#include "samplers/device_usage.h"
#include "measure/phase_cycles.h"
#include "samplers/pool_sampler.h"
#include "record/recorder.h"
#include "record/tls.h"

#define MEMTRACE_EXPORT __attribute__((visibility("default")))


namespace memtrace {
namespace {

template <typename Fn>
Fn real_fn(HookId id, HookPath path) {
  return reinterpret_cast<Fn>(hook_real(id, path));
}

// Where an allocation's memory lives decides whether the device's free/total at a failure says anything.
bool charged_to_device(Memory memory) {
  return memory == Memory::kDevice || memory == Memory::kArray || memory == Memory::kManaged;
}

// One successful or failed allocation, `e` filled in but for its kind. A failure because memory ran out is
// an OOM event carrying the request (and, for device memory, the device's free/total memory at that moment);
// other failures are not memory events.
void record_alloc(MemoryEvent e, bool ok, bool out_of_memory) {
  if (!ok && !out_of_memory) return;
  e.kind = ok ? EventKind::kAlloc : EventKind::kOom;
  if (!ok) {
    e.address = 0;
    if (charged_to_device(e.memory)) device_memory_info(&e.device_free_bytes, &e.device_total_bytes);
  }
  record_event(e);
  if (!ok && charged_to_device(e.memory))
    device_usage_after_oom(e.device, e.api, e.device_total_bytes != 0, e.device_free_bytes, e.device_total_bytes);
}

// Memory the driver frees with the context it was made in (cuCtxDestroy, cuDevicePrimaryCtxReset): device
// memory, arrays, managed and page-locked host memory of cuMemAlloc* / cudaMalloc* / cuMemAllocHost /
// cuMemHostAlloc. The ALLOC names that context (the current one: allocations are made in it), so that
// destroying a context made with cuCtxCreate frees its own allocations and not the primary context's of the
// same device. One driver call, for allocations that succeeded.
void record_context_alloc(MemoryEvent e, bool ok, bool out_of_memory) {
  if (ok) e.context = current_context();
  record_alloc(e, ok, out_of_memory);
}

void on_alloc(Api api, Layer layer, bool ok, bool out_of_memory, uint64_t address, uint64_t size,
              uint64_t stream, int device, int result) {
  record_context_alloc({.layer = layer, .api = api, .device = device, .stream = stream, .address = address,
                        .size = size, .result = result},
                       ok, out_of_memory);
}

// The device and size of a free are those of the allocation it frees: the analyzer takes them from there,
// so a block freed while another device is current is still charged to its own.
void on_free(MemoryEvent e) {
  if (e.address == 0) return;  // cudaFree(nullptr) is the classic "create the context" call
  e.kind = EventKind::kFree;
  record_event(e);
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
// `e` names the api, layer, address and stream (and capture_id for a free made during stream capture).
class FreeEvent {
 public:
  FreeEvent(const HookScope& scope, const MemoryEvent& e)
      : event_(e), deferred_(scope.outermost() && recorder_exit_begun()) {
    if (scope.outermost() && !deferred_) on_free(event_);
  }
  FreeEvent(const HookScope& scope, Api api, Layer layer, uint64_t address, uint64_t stream)
      : FreeEvent(scope, {.layer = layer, .api = api, .stream = stream, .address = address}) {}
  void done(int result) {
    event_.result = result;
    if (deferred_ && freed(result)) on_free(event_);
  }

 private:
  MemoryEvent event_;
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

// A host location (CU_MEM_LOCATION_TYPE_HOST, _HOST_NUMA, _HOST_NUMA_CURRENT) makes page-locked host memory.
bool host_location(CUmemLocationType type) {
  return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

// A stream-ordered allocation: made while its stream is being captured, it is a memory node of the graph
// being built, not memory yet (capture_id). One driver call, only for allocations that succeeded.
void record_async_alloc(MemoryEvent e, bool ok, bool out_of_memory, bool per_thread_stream) {
  if (ok) e.capture_id = stream_capture_id(e.stream, per_thread_stream);
  record_alloc(e, ok, out_of_memory);
  // The pool may have grown to hold the block (a captured allocation is not memory until the graph runs).
  if (ok && e.capture_id == 0) sample_pool_after_alloc(e.api, e.device, e.address);
}

// The free event of a stream-ordered free; one driver call for the capture check, by the outermost hook only.
MemoryEvent async_free(const HookScope& scope, Api api, uint64_t address, uint64_t stream, bool per_thread_stream) {
  MemoryEvent e{.layer = Layer::kBlock, .api = api, .stream = stream, .address = address};
  if (scope.outermost() && address != 0) e.capture_id = stream_capture_id(stream, per_thread_stream);
  return e;
}

// Another process's memory mapped here (IPC): listed as imported, never this process's allocation.
void record_import(Api api, uint64_t address) {
  int current = current_device();
  record_event({.kind = EventKind::kAlloc, .layer = Layer::kDriver, .api = api,
                .device = device_of_pointer(address, current), .address = address,
                .size = allocation_range_bytes(address), .memory = Memory::kImported});
}

// Each device's primary context, as cuDevicePrimaryCtxRetain last returned it: a reset (cuDevicePrimaryCtxReset,
// cudaDeviceReset) names the device only, and its CONTEXT_DESTROY must name the context whose allocations go.
// 0 = never seen. A fixed table (devices 0..63, as far as a trace tells them apart): a hook may not allocate.
// Relaxed: each slot is one value on its own, and a retain returns the same handle to every thread.
constexpr int kMaxPrimaryContexts = 64;
std::atomic<uint64_t> g_primary_contexts[kMaxPrimaryContexts];

bool primary_context_slot(int device) { return device >= 0 && device < kMaxPrimaryContexts; }

void remember_primary_context(int device, uint64_t context) {
  if (primary_context_slot(device)) g_primary_contexts[device].store(context, std::memory_order_relaxed);
}

uint64_t primary_context(int device) {
  return primary_context_slot(device) ? g_primary_contexts[device].load(std::memory_order_relaxed) : 0;
}

// Recorded before the real call, for the reason a free is (FreeEvent): once the context is gone, another
// thread's allocation may get one of its addresses. Without a device there is nothing to attribute.
void record_context_destroy(Api api, int device, uint64_t context) {
  if (device < 0) return;
  record_event({.kind = EventKind::kContextDestroy, .api = api, .device = device, .address = context});
}

// The capture id is asked for before the real call (the capture is over after it) and recorded with the
// graph the call returned.
void record_graph_captured(Api api, uint64_t stream, const void* graph_out, uint64_t capture_id) {
  if (capture_id == 0 || graph_out == nullptr) return;
  uint64_t graph = ptr_value(*static_cast<void* const*>(graph_out));
  record_event({.kind = EventKind::kGraphCaptured, .api = api, .stream = stream, .graph = graph,
                .capture_id = capture_id});
}

void record_instantiate(Api api, uint64_t exec, uint64_t graph) {
  record_event({.kind = EventKind::kGraphInstantiate, .api = api, .address = exec, .graph = graph});
}

void record_launch(Api api, uint64_t exec, uint64_t stream) {
  record_event({.kind = EventKind::kGraphLaunch, .api = api, .stream = stream, .address = exec});
  // The launch may have grown the device's graph memory pool (its alloc nodes took memory): pool_sampler.h.
  sample_graph_pool(current_device(), api);
}

// A memory node of `graph`: an allocation of `size` bytes at `address` on `device` each time the graph runs.
void record_alloc_node(Api api, uint64_t graph, int device, uint64_t address, uint64_t size) {
  record_event({.kind = EventKind::kAlloc, .layer = Layer::kBlock, .api = api, .device = device, .address = address,
                .size = size, .graph = graph});
}

void record_free_node(Api api, uint64_t graph, uint64_t address) {
  record_event({.kind = EventKind::kFree, .layer = Layer::kBlock, .api = api, .address = address, .graph = graph});
}

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

// ---- CUDA runtime: device memory -------------------------------------------------------------------------

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

// A pitched 3D allocation is plain device memory of extent.height * extent.depth rows of `pitch` bytes.
MEMTRACE_EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent) {
  MEMTRACE_FORWARD_OR(cudaMalloc3D, cudaErrorInitializationError);
  cudaError_t r = real(pitchedDevPtr, extent);
  if (scope.outermost()) {
    bool ok = r == cudaSuccess;
    uint64_t rows = uint64_t{extent.height} * extent.depth;
    record_context_alloc({.layer = Layer::kDriver, .api = Api::kCudaMalloc3D, .device = current_device(),
                          .address = ok ? ptr_value(pitchedDevPtr->ptr) : 0,
                          .size = (ok ? pitchedDevPtr->pitch : extent.width) * rows, .result = r},
                         ok, r == kRuntimeOom);
  }
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  MEMTRACE_FORWARD_OR(cudaMallocManaged, cudaErrorInitializationError);
  cudaError_t r = real(devPtr, size, flags);
  if (scope.outermost())
    record_context_alloc({.layer = Layer::kDriver, .api = Api::kCudaMallocManaged, .device = current_device(),
                          .address = devPtr ? ptr_value(*devPtr) : 0, .size = size, .result = r,
                          .memory = Memory::kManaged},
                         r == cudaSuccess, r == kRuntimeOom);
  return r;
}

// Stream-ordered allocations are blocks of the device's memory pool: LAYER_BLOCK (see memtrace.proto). Made
// while their stream is being captured, they are memory nodes of the graph being built (capture_id).
#define MEMTRACE_RUNTIME_MALLOC_ASYNC(symbol, per_thread_stream)                                            \
  MEMTRACE_EXPORT cudaError_t symbol(void** devPtr, size_t size, cudaStream_t stream) {                     \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real(devPtr, size, stream);                                                             \
    if (scope.outermost())                                                                                  \
      record_async_alloc({.layer = Layer::kBlock, .api = Api::kCudaMallocAsync, .device = current_device(), \
                          .stream = stream_value(stream), .address = devPtr ? ptr_value(*devPtr) : 0,       \
                          .size = size, .result = r},                                                       \
                         r == cudaSuccess, r == kRuntimeOom, per_thread_stream);                            \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_MALLOC_ASYNC(cudaMallocAsync, false)
MEMTRACE_RUNTIME_MALLOC_ASYNC(cudaMallocAsync_ptsz, true)

#define MEMTRACE_RUNTIME_FREE_ASYNC(symbol, per_thread_stream)                                               \
  MEMTRACE_EXPORT cudaError_t symbol(void* devPtr, cudaStream_t stream) {                                   \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    FreeEvent event(scope, async_free(scope, Api::kCudaFreeAsync, ptr_value(devPtr), stream_value(stream),  \
                                      per_thread_stream));                                                  \
    cudaError_t r = real(devPtr, stream);                                                                   \
    event.done(r);                                                                                          \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_FREE_ASYNC(cudaFreeAsync, false)
MEMTRACE_RUNTIME_FREE_ASYNC(cudaFreeAsync_ptsz, true)

#define MEMTRACE_RUNTIME_MALLOC_FROM_POOL(symbol, per_thread_stream)                                         \
  MEMTRACE_EXPORT cudaError_t symbol(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {    \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real(ptr, size, pool, stream);                                                          \
    if (scope.outermost()) {                                                                                \
      bool ok = r == cudaSuccess;                                                                           \
      uint64_t address = ok && ptr ? ptr_value(*ptr) : 0;                                                   \
      record_async_alloc({.layer = Layer::kBlock, .api = Api::kCudaMallocFromPoolAsync,                     \
                          .device = pool_block_device(ok, address), .stream = stream_value(stream),         \
                          .address = address, .size = size, .result = r},                                   \
                         ok, r == kRuntimeOom, per_thread_stream);                                          \
    }                                                                                                       \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_MALLOC_FROM_POOL(cudaMallocFromPoolAsync, false)
MEMTRACE_RUNTIME_MALLOC_FROM_POOL(cudaMallocFromPoolAsync_ptsz, true)

// ---- CUDA runtime: host memory ---------------------------------------------------------------------------
// Page-locked host memory is never charged to a GPU; `device` is the current one, for the record only.

#define MEMTRACE_RUNTIME_HOST_ALLOC(symbol, api_id, params, args)                                              \
  MEMTRACE_EXPORT cudaError_t symbol params {                                                               \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real args;                                                                              \
    if (scope.outermost())                                                                                  \
      record_context_alloc({.layer = Layer::kDriver, .api = api_id, .device = current_device(),                \
                            .address = ptr ? ptr_value(*ptr) : 0, .size = size, .result = r,                \
                            .memory = Memory::kHostPinned},                                                 \
                           r == cudaSuccess, r == kRuntimeOom);                                             \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_HOST_ALLOC(cudaMallocHost, Api::kCudaMallocHost, (void** ptr, size_t size), (ptr, size))
MEMTRACE_RUNTIME_HOST_ALLOC(cudaHostAlloc, Api::kCudaHostAlloc, (void** ptr, size_t size, unsigned int flags),
                            (ptr, size, flags))

MEMTRACE_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  MEMTRACE_FORWARD_OR(cudaFreeHost, cudaErrorInitializationError);
  FreeEvent event(scope, Api::kCudaFreeHost, Layer::kDriver, ptr_value(ptr), 0);
  cudaError_t r = real(ptr);
  event.done(r);
  return r;
}

// Registering page-locks memory the program already has: the registered range is what the event names.
MEMTRACE_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  MEMTRACE_FORWARD_OR(cudaHostRegister, cudaErrorInitializationError);
  cudaError_t r = real(ptr, size, flags);
  if (scope.outermost())
    record_alloc({.layer = Layer::kDriver, .api = Api::kCudaHostRegister, .device = current_device(),
                  .address = ptr_value(ptr), .size = size, .result = r, .memory = Memory::kHostRegistered},
                 r == cudaSuccess, false);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaHostUnregister(void* ptr) {
  MEMTRACE_FORWARD_OR(cudaHostUnregister, cudaErrorInitializationError);
  FreeEvent event(scope, Api::kCudaHostUnregister, Layer::kDriver, ptr_value(ptr), 0);
  cudaError_t r = real(ptr);
  event.done(r);
  return r;
}

// ---- CUDA runtime: arrays ----------------------------------------------------------------------------------
// A runtime array handle is the driver's (cudaArray_t and CUarray name the same object). Its size is what
// the driver set aside where it says (deferred-mapping arrays only), else its elements' bytes, which is also
// the size of a request that failed (array_bytes.h).

uint64_t runtime_element_bytes(const cudaChannelFormatDesc* desc) {
  return desc ? runtime_format_element_bytes(desc->x, desc->y, desc->z, desc->w) : 0;
}

#define MEMTRACE_RUNTIME_ARRAY(symbol, api_id, handle_type, driver_bytes, elements, params, args)             \
  MEMTRACE_EXPORT cudaError_t symbol params {                                                               \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real args;                                                                              \
    if (scope.outermost()) {                                                                                \
      bool ok = r == cudaSuccess;                                                                           \
      int device = current_device();                                                                        \
      uint64_t bytes = ok ? driver_bytes(reinterpret_cast<handle_type>(*array), device) : 0;                \
      record_context_alloc({.layer = Layer::kDriver, .api = api_id, .device = device,                       \
                            .address = ok ? ptr_value(*array) : 0, .size = bytes ? bytes : elements,        \
                            .result = r, .memory = Memory::kArray},                                         \
                           ok, r == kRuntimeOom);                                                           \
    }                                                                                                       \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_ARRAY(cudaMallocArray, Api::kCudaMallocArray, CUarray, array_bytes,
                       array_element_bytes(width, height, 0, runtime_element_bytes(desc), 1),
                       (cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width, size_t height,
                        unsigned int flags),
                       (array, desc, width, height, flags))
MEMTRACE_RUNTIME_ARRAY(cudaMalloc3DArray, Api::kCudaMalloc3DArray, CUarray, array_bytes,
                       array_element_bytes(extent.width, extent.height, extent.depth, runtime_element_bytes(desc),
                                           1),
                       (cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                        unsigned int flags),
                       (array, desc, extent, flags))
MEMTRACE_RUNTIME_ARRAY(cudaMallocMipmappedArray, Api::kCudaMallocMipmappedArray, CUmipmappedArray,
                       mipmapped_array_bytes,
                       array_element_bytes(extent.width, extent.height, extent.depth, runtime_element_bytes(desc),
                                           levels),
                       (cudaMipmappedArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                        unsigned int levels, unsigned int flags),
                       (array, desc, extent, levels, flags))

MEMTRACE_EXPORT cudaError_t cudaFreeArray(cudaArray_t array) {
  MEMTRACE_FORWARD_OR(cudaFreeArray, cudaErrorInitializationError);
  FreeEvent event(scope, Api::kCudaFreeArray, Layer::kDriver, ptr_value(array), 0);
  cudaError_t r = real(array);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t array) {
  MEMTRACE_FORWARD_OR(cudaFreeMipmappedArray, cudaErrorInitializationError);
  FreeEvent event(scope, Api::kCudaFreeMipmappedArray, Layer::kDriver, ptr_value(array), 0);
  cudaError_t r = real(array);
  event.done(r);
  return r;
}

// ---- CUDA runtime: imports and teardown --------------------------------------------------------------------

// Another process's allocation mapped here: its size is the range the driver mapped.
MEMTRACE_EXPORT cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  MEMTRACE_FORWARD_OR(cudaIpcOpenMemHandle, cudaErrorInitializationError);
  cudaError_t r = real(devPtr, handle, flags);
  if (scope.outermost() && r == cudaSuccess) record_import(Api::kCudaIpcOpenMemHandle, ptr_value(*devPtr));
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  MEMTRACE_FORWARD_OR(cudaIpcCloseMemHandle, cudaErrorInitializationError);
  FreeEvent event(scope, Api::kCudaIpcCloseMemHandle, Layer::kDriver, ptr_value(devPtr), 0);
  cudaError_t r = real(devPtr);
  event.done(r);
  return r;
}

// Destroys the current device's primary context, and with it what the driver frees with a context.
MEMTRACE_EXPORT cudaError_t cudaDeviceReset() {
  MEMTRACE_FORWARD_OR(cudaDeviceReset, cudaErrorInitializationError);
  if (scope.outermost()) {
    int device = current_device();
    record_context_destroy(Api::kCudaDeviceReset, device, primary_context(device));
  }
  return real();
}

// ---- CUDA runtime: graph memory ----------------------------------------------------------------------------

#define MEMTRACE_RUNTIME_END_CAPTURE(symbol, per_thread_stream)                                              \
  MEMTRACE_EXPORT cudaError_t symbol(cudaStream_t stream, cudaGraph_t* graph) {                             \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    uint64_t capture_id = scope.outermost() ? stream_capture_id(stream_value(stream), per_thread_stream) : 0; \
    cudaError_t r = real(stream, graph);                                                                    \
    if (r == cudaSuccess) record_graph_captured(Api::kCudaStreamEndCapture, stream_value(stream), graph, capture_id); \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_END_CAPTURE(cudaStreamEndCapture, false)
MEMTRACE_RUNTIME_END_CAPTURE(cudaStreamEndCapture_ptsz, true)

#define MEMTRACE_RUNTIME_INSTANTIATE(symbol, options_type)                                                   \
  MEMTRACE_EXPORT cudaError_t symbol(cudaGraphExec_t* exec, cudaGraph_t graph, options_type options) {     \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real(exec, graph, options);                                                             \
    if (scope.outermost() && r == cudaSuccess && exec)                                                      \
      record_instantiate(Api::kCudaGraphInstantiate, ptr_value(*exec), ptr_value(graph));                   \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_INSTANTIATE(cudaGraphInstantiate, unsigned long long)
MEMTRACE_RUNTIME_INSTANTIATE(cudaGraphInstantiateWithFlags, unsigned long long)
MEMTRACE_RUNTIME_INSTANTIATE(cudaGraphInstantiateWithParams, cudaGraphInstantiateParams*)
MEMTRACE_RUNTIME_INSTANTIATE(cudaGraphInstantiateWithParams_ptsz, cudaGraphInstantiateParams*)

#define MEMTRACE_RUNTIME_GRAPH_LAUNCH(symbol)                                                                \
  MEMTRACE_EXPORT cudaError_t symbol(cudaGraphExec_t exec, cudaStream_t stream) {                           \
    MEMTRACE_FORWARD_OR(symbol, cudaErrorInitializationError);                                              \
    cudaError_t r = real(exec, stream);                                                                     \
    if (scope.outermost() && r == cudaSuccess)                                                              \
      record_launch(Api::kCudaGraphLaunch, ptr_value(exec), stream_value(stream));                          \
    return r;                                                                                               \
  }
MEMTRACE_RUNTIME_GRAPH_LAUNCH(cudaGraphLaunch)
MEMTRACE_RUNTIME_GRAPH_LAUNCH(cudaGraphLaunch_ptsz)

MEMTRACE_EXPORT cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                     const cudaGraphNode_t* dependencies, size_t count,
                                                     cudaMemAllocNodeParams* params) {
  MEMTRACE_FORWARD_OR(cudaGraphAddMemAllocNode, cudaErrorInitializationError);
  cudaError_t r = real(node, graph, dependencies, count, params);
  if (scope.outermost() && r == cudaSuccess)
    record_alloc_node(Api::kCudaGraphAddMemAllocNode, ptr_value(graph), params->poolProps.location.id,
                      ptr_value(params->dptr), params->bytesize);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                    const cudaGraphNode_t* dependencies, size_t count, void* dptr) {
  MEMTRACE_FORWARD_OR(cudaGraphAddMemFreeNode, cudaErrorInitializationError);
  cudaError_t r = real(node, graph, dependencies, count, dptr);
  if (scope.outermost() && r == cudaSuccess)
    record_free_node(Api::kCudaGraphAddMemFreeNode, ptr_value(graph), ptr_value(dptr));
  return r;
}

// ---- CUDA driver: device memory ----------------------------------------------------------------------------

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
    record_context_alloc({.layer = Layer::kDriver, .api = Api::kCuMemAllocManaged, .device = current_device(),
                          .address = dptr ? *dptr : 0, .size = bytesize, .result = r, .memory = Memory::kManaged},
                         r == CUDA_SUCCESS, r == kDriverOom);
  return r;
}

#define MEMTRACE_DRIVER_ALLOC_ASYNC(symbol, per_thread_stream)                                               \
  MEMTRACE_EXPORT CUresult symbol(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {                    \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real(dptr, bytesize, stream);                                                              \
    if (scope.outermost())                                                                                  \
      record_async_alloc({.layer = Layer::kBlock, .api = Api::kCuMemAllocAsync, .device = current_device(), \
                          .stream = stream_value(stream), .address = dptr ? *dptr : 0, .size = bytesize,    \
                          .result = r},                                                                     \
                         r == CUDA_SUCCESS, r == kDriverOom, per_thread_stream);                            \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_ALLOC_ASYNC(cuMemAllocAsync, false)
MEMTRACE_DRIVER_ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)

#define MEMTRACE_DRIVER_ALLOC_FROM_POOL(symbol, per_thread_stream)                                           \
  MEMTRACE_EXPORT CUresult symbol(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) { \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real(dptr, bytesize, pool, stream);                                                        \
    if (scope.outermost()) {                                                                                \
      bool ok = r == CUDA_SUCCESS;                                                                          \
      uint64_t address = ok && dptr ? *dptr : 0;                                                            \
      record_async_alloc({.layer = Layer::kBlock, .api = Api::kCuMemAllocFromPoolAsync,                     \
                          .device = pool_block_device(ok, address), .stream = stream_value(stream),         \
                          .address = address, .size = bytesize, .result = r},                               \
                         ok, r == kDriverOom, per_thread_stream);                                           \
    }                                                                                                       \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync, false)
MEMTRACE_DRIVER_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, true)

#define MEMTRACE_DRIVER_FREE_ASYNC(symbol, per_thread_stream)                                                \
  MEMTRACE_EXPORT CUresult symbol(CUdeviceptr dptr, CUstream stream) {                                      \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    FreeEvent event(scope, async_free(scope, Api::kCuMemFreeAsync, dptr, stream_value(stream),              \
                                      per_thread_stream));                                                  \
    CUresult r = real(dptr, stream);                                                                        \
    event.done(r);                                                                                          \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_FREE_ASYNC(cuMemFreeAsync, false)
MEMTRACE_DRIVER_FREE_ASYNC(cuMemFreeAsync_ptsz, true)

// ---- CUDA driver: virtual memory management ----------------------------------------------------------------
// cuMemCreate is physical memory (keyed by its handle); map/unmap and address reservations are recorded for
// the analyzer but are not memory of their own.

MEMTRACE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  MEMTRACE_FORWARD_OR(cuMemCreate, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(handle, size, prop, flags);
  if (scope.outermost()) {
    bool host = prop && host_location(prop->location.type);
    int device = host                                                        ? current_device()
                 : prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id
                                                                              : -1;
    record_alloc({.layer = Layer::kDriver, .api = Api::kCuMemCreate, .device = device,
                  .address = handle ? *handle : 0, .size = size, .result = r,
                  .memory = host ? Memory::kHostPinned : Memory::kDevice},
                 r == CUDA_SUCCESS, r == kDriverOom);
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

// ---- CUDA driver: host memory ------------------------------------------------------------------------------

#define MEMTRACE_DRIVER_HOST_ALLOC(symbol, api_id, params, args)                                               \
  MEMTRACE_EXPORT CUresult symbol params {                                                                  \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real args;                                                                                 \
    if (scope.outermost())                                                                                  \
      record_context_alloc({.layer = Layer::kDriver, .api = api_id, .device = current_device(),                \
                            .address = pp ? ptr_value(*pp) : 0, .size = bytesize, .result = r,              \
                            .memory = Memory::kHostPinned},                                                 \
                           r == CUDA_SUCCESS, r == kDriverOom);                                             \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_HOST_ALLOC(cuMemAllocHost_v2, Api::kCuMemAllocHost, (void** pp, size_t bytesize), (pp, bytesize))
MEMTRACE_DRIVER_HOST_ALLOC(cuMemHostAlloc, Api::kCuMemHostAlloc, (void** pp, size_t bytesize, unsigned int flags),
                           (pp, bytesize, flags))

MEMTRACE_EXPORT CUresult cuMemFreeHost(void* p) {
  MEMTRACE_FORWARD_OR(cuMemFreeHost, CUDA_ERROR_NOT_INITIALIZED);
  FreeEvent event(scope, Api::kCuMemFreeHost, Layer::kDriver, ptr_value(p), 0);
  CUresult r = real(p);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  MEMTRACE_FORWARD_OR(cuMemHostRegister_v2, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(p, bytesize, flags);
  if (scope.outermost())
    record_alloc({.layer = Layer::kDriver, .api = Api::kCuMemHostRegister, .device = current_device(),
                  .address = ptr_value(p), .size = bytesize, .result = r, .memory = Memory::kHostRegistered},
                 r == CUDA_SUCCESS, false);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemHostUnregister(void* p) {
  MEMTRACE_FORWARD_OR(cuMemHostUnregister, CUDA_ERROR_NOT_INITIALIZED);
  FreeEvent event(scope, Api::kCuMemHostUnregister, Layer::kDriver, ptr_value(p), 0);
  CUresult r = real(p);
  event.done(r);
  return r;
}

// ---- CUDA driver: arrays -----------------------------------------------------------------------------------
// Sized as the runtime's arrays are (see there).

template <typename Descriptor>
uint64_t driver_element_bytes(const Descriptor* desc) {
  return desc ? driver_format_element_bytes(desc->Format, desc->NumChannels) : 0;
}

#define MEMTRACE_DRIVER_ARRAY(symbol, api_id, driver_bytes, elements, params, args)                         \
  MEMTRACE_EXPORT CUresult symbol params {                                                                  \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real args;                                                                                 \
    if (scope.outermost()) {                                                                                \
      bool ok = r == CUDA_SUCCESS;                                                                          \
      int device = current_device();                                                                        \
      uint64_t bytes = ok ? driver_bytes(*handle, device) : 0;                                              \
      record_context_alloc({.layer = Layer::kDriver, .api = api_id, .device = device,                       \
                            .address = ok ? ptr_value(*handle) : 0, .size = bytes ? bytes : elements,       \
                            .result = r, .memory = Memory::kArray},                                         \
                           ok, r == kDriverOom);                                                            \
    }                                                                                                       \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_ARRAY(cuArrayCreate_v2, Api::kCuArrayCreate, array_bytes,
                      desc ? array_element_bytes(desc->Width, desc->Height, 0, driver_element_bytes(desc), 1) : 0,
                      (CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc), (handle, desc))
MEMTRACE_DRIVER_ARRAY(cuArray3DCreate_v2, Api::kCuArray3DCreate, array_bytes,
                      desc ? array_element_bytes(desc->Width, desc->Height, desc->Depth, driver_element_bytes(desc), 1)
                           : 0,
                      (CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc), (handle, desc))
MEMTRACE_DRIVER_ARRAY(cuMipmappedArrayCreate, Api::kCuMipmappedArrayCreate, mipmapped_array_bytes,
                      desc ? array_element_bytes(desc->Width, desc->Height, desc->Depth, driver_element_bytes(desc),
                                                 levels)
                           : 0,
                      (CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels),
                      (handle, desc, levels))

MEMTRACE_EXPORT CUresult cuArrayDestroy(CUarray array) {
  MEMTRACE_FORWARD_OR(cuArrayDestroy, CUDA_ERROR_NOT_INITIALIZED);
  FreeEvent event(scope, Api::kCuArrayDestroy, Layer::kDriver, ptr_value(array), 0);
  CUresult r = real(array);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  MEMTRACE_FORWARD_OR(cuMipmappedArrayDestroy, CUDA_ERROR_NOT_INITIALIZED);
  FreeEvent event(scope, Api::kCuMipmappedArrayDestroy, Layer::kDriver, ptr_value(array), 0);
  CUresult r = real(array);
  event.done(r);
  return r;
}

// ---- CUDA driver: imports ----------------------------------------------------------------------------------

MEMTRACE_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  MEMTRACE_FORWARD_OR(cuIpcOpenMemHandle_v2, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(pdptr, handle, flags);
  if (scope.outermost() && r == CUDA_SUCCESS) record_import(Api::kCuIpcOpenMemHandle, *pdptr);
  return r;
}

MEMTRACE_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  MEMTRACE_FORWARD_OR(cuIpcCloseMemHandle, CUDA_ERROR_NOT_INITIALIZED);
  FreeEvent event(scope, Api::kCuIpcCloseMemHandle, Layer::kDriver, dptr, 0);
  CUresult r = real(dptr);
  event.done(r);
  return r;
}

// A buffer of external memory (Vulkan, D3D, NvSciBuf...) mapped into this address space; cuMemFree ends it.
MEMTRACE_EXPORT CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr* devPtr, CUexternalMemory extMem,
                                                         const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* bufferDesc) {
  MEMTRACE_FORWARD_OR(cuExternalMemoryGetMappedBuffer, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(devPtr, extMem, bufferDesc);
  if (scope.outermost() && r == CUDA_SUCCESS)
    record_event({.kind = EventKind::kAlloc, .layer = Layer::kDriver, .api = Api::kCuExternalMemoryGetMappedBuffer,
                  .device = current_device(), .address = *devPtr, .size = bufferDesc->size,
                  .memory = Memory::kImported});
  return r;
}

// An allocation handle of another process: the same handle space as cuMemCreate's, so its maps, unmaps and
// release pair with it. Its size is not known here (0).
MEMTRACE_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                        CUmemAllocationHandleType type) {
  MEMTRACE_FORWARD_OR(cuMemImportFromShareableHandle, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(handle, osHandle, type);
  if (scope.outermost() && r == CUDA_SUCCESS)
    record_event({.kind = EventKind::kAlloc, .layer = Layer::kDriver, .api = Api::kCuMemImportFromShareableHandle,
                  .device = device_of_handle(*handle), .address = *handle, .memory = Memory::kImported});
  return r;
}

// ---- CUDA driver: context teardown -------------------------------------------------------------------------
// The release of a primary context's last reference (cuDevicePrimaryCtxRelease) destroys it too, but the
// reference count is the driver's secret: not recorded.

MEMTRACE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  MEMTRACE_FORWARD_OR(cuCtxDestroy_v2, CUDA_ERROR_NOT_INITIALIZED);
  if (scope.outermost()) record_context_destroy(Api::kCuCtxDestroy, device_of_context(ctx), ptr_value(ctx));
  return real(ctx);
}

// The ABI of CUDA 11.0 and that of CUDA 7.0, which the CUDA 13 runtime asks for (hooks.def).
#define MEMTRACE_DRIVER_PRIMARY_CTX_RESET(symbol)                                                            \
  MEMTRACE_EXPORT CUresult symbol(CUdevice dev) {                                                            \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                 \
    if (scope.outermost()) record_context_destroy(Api::kCuDevicePrimaryCtxReset, dev, primary_context(dev)); \
    return real(dev);                                                                                        \
  }
MEMTRACE_DRIVER_PRIMARY_CTX_RESET(cuDevicePrimaryCtxReset_v2)
MEMTRACE_DRIVER_PRIMARY_CTX_RESET(memtrace_cuDevicePrimaryCtxReset_v7000)

// Every retain is remembered, nested in another hook or not (the runtime retains inside cudaMalloc and
// cudaSetDevice): the handle is a fact about the device, not an event.
MEMTRACE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  MEMTRACE_FORWARD_OR(cuDevicePrimaryCtxRetain, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(pctx, dev);
  if (r == CUDA_SUCCESS && pctx) remember_primary_context(dev, ptr_value(*pctx));
  return r;
}

// ---- CUDA driver: graph memory -----------------------------------------------------------------------------

#define MEMTRACE_DRIVER_END_CAPTURE(symbol, per_thread_stream)                                               \
  MEMTRACE_EXPORT CUresult symbol(CUstream stream, CUgraph* graph) {                                        \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    uint64_t capture_id = scope.outermost() ? stream_capture_id(stream_value(stream), per_thread_stream) : 0; \
    CUresult r = real(stream, graph);                                                                       \
    if (r == CUDA_SUCCESS) record_graph_captured(Api::kCuStreamEndCapture, stream_value(stream), graph, capture_id); \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_END_CAPTURE(cuStreamEndCapture, false)
MEMTRACE_DRIVER_END_CAPTURE(cuStreamEndCapture_ptsz, true)

#define MEMTRACE_DRIVER_INSTANTIATE(symbol, options_type)                                                    \
  MEMTRACE_EXPORT CUresult symbol(CUgraphExec* exec, CUgraph graph, options_type options) {                 \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real(exec, graph, options);                                                                \
    if (scope.outermost() && r == CUDA_SUCCESS && exec)                                                     \
      record_instantiate(Api::kCuGraphInstantiate, ptr_value(*exec), ptr_value(graph));                     \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_INSTANTIATE(cuGraphInstantiateWithFlags, unsigned long long)
MEMTRACE_DRIVER_INSTANTIATE(memtrace_cuGraphInstantiate_v12000, unsigned long long)
MEMTRACE_DRIVER_INSTANTIATE(cuGraphInstantiateWithParams, CUDA_GRAPH_INSTANTIATE_PARAMS*)
MEMTRACE_DRIVER_INSTANTIATE(cuGraphInstantiateWithParams_ptsz, CUDA_GRAPH_INSTANTIATE_PARAMS*)

#define MEMTRACE_DRIVER_GRAPH_LAUNCH(symbol)                                                                 \
  MEMTRACE_EXPORT CUresult symbol(CUgraphExec exec, CUstream stream) {                                      \
    MEMTRACE_FORWARD_OR(symbol, CUDA_ERROR_NOT_INITIALIZED);                                                \
    CUresult r = real(exec, stream);                                                                        \
    if (scope.outermost() && r == CUDA_SUCCESS)                                                             \
      record_launch(Api::kCuGraphLaunch, ptr_value(exec), stream_value(stream));                            \
    return r;                                                                                               \
  }
MEMTRACE_DRIVER_GRAPH_LAUNCH(cuGraphLaunch)
MEMTRACE_DRIVER_GRAPH_LAUNCH(cuGraphLaunch_ptsz)

MEMTRACE_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                                size_t count, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  MEMTRACE_FORWARD_OR(cuGraphAddMemAllocNode, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(node, graph, dependencies, count, params);
  if (scope.outermost() && r == CUDA_SUCCESS)
    record_alloc_node(Api::kCuGraphAddMemAllocNode, ptr_value(graph), params->poolProps.location.id, params->dptr,
                      params->bytesize);
  return r;
}

MEMTRACE_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                               size_t count, CUdeviceptr dptr) {
  MEMTRACE_FORWARD_OR(cuGraphAddMemFreeNode, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(node, graph, dependencies, count, dptr);
  if (scope.outermost() && r == CUDA_SUCCESS) record_free_node(Api::kCuGraphAddMemFreeNode, ptr_value(graph), dptr);
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
  MEMTRACE_PHASE(kEnter);
  {
    HookScope scope;
    if (scope.outermost() && alloc_size != 0 && device.type == kCudaDeviceType && !MEMTRACE_PHASE_SKIP_RECORD()) {
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
  MEMTRACE_PHASE(kForwarded);
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
      bool have_memory_info = device_memory_info(&e.device_free_bytes, &e.device_total_bytes);
      record_event(e);
      device_usage_after_oom(e.device, e.api, have_memory_info, e.device_free_bytes, e.device_total_bytes);
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
#include "hooks/hooks.def"
#undef MEMTRACE_SAMPLING_HOOKS_ELSEWHERE
// The aliases sync_hooks.cc defines, declared for the table below. Only those: GCC refuses a second
// declaration of a function whose type came with default arguments (decltype of cudaMallocManaged...).
#define MEMTRACE_SAMPLING_HOOKS_ONLY
#define MEMTRACE_RUNTIME_HOOK(symbol) \
  extern "C" decltype(::symbol) memtrace_own_##symbol __attribute__((visibility("hidden")));
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) MEMTRACE_RUNTIME_HOOK(symbol)
#include "hooks/hooks.def"
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
// Our own hidden name: no other definition can take its place.
#define MEMTRACE_DRIVER_PROC(symbol, base_name, min_version, per_thread_stream)                           \
  {#symbol, base_name, min_version, per_thread_stream,                                                    \
   reinterpret_cast<void*>(&HandedOut<&::symbol, decltype(::symbol)>::call), {nullptr}, {nullptr}},
#include "hooks/hooks.def"
};
}  // namespace memtrace
