// The interposed CUDA runtime entry points of hooks.def's runtime section (libcudart.so.13's exported
// functions). Each forwards to the real function and, if it is the outermost hook on this thread, records
// what the call did (hook_events.h). Never a call into a public CUDA entry point: only the real pointers of
// the hook table. The sampling hooks (synchronizations, pool calls) are in sync_hooks.cc.
#include "hooks/array_bytes.h"
#include "hooks/hook_events.h"
#include "hooks/hook_table.h"
#include "hooks/resolver.h"
#include "record/recorder.h"

using namespace memtrace;

// ---- CUDA runtime: device memory -------------------------------------------------------------------------

MEMTRACE_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
  auto real = real_fn<decltype(&::cudaMalloc)>(kHook_cudaMalloc);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(devPtr, size);
  if (scope.outermost())
    on_device_alloc(Api::kCudaMalloc, r == cudaSuccess, r == kRuntimeOom, devPtr ? ptr_value(*devPtr) : 0, size, r);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaFree(void* devPtr) {
  auto real = real_fn<decltype(&::cudaFree)>(kHook_cudaFree);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  // Dormant: the live set forgets the pointer before the real call, as FreeEvent records a free (hook_events.h).
  if (scope.outermost() && note_device_free_if_dormant(ptr_value(devPtr))) return real(devPtr);
  FreeEvent event(scope, Api::kCudaFree, Layer::kDriver, ptr_value(devPtr), 0);
  cudaError_t r = real(devPtr);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  auto real = real_fn<decltype(&::cudaMallocPitch)>(kHook_cudaMallocPitch);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(devPtr, pitch, width, height);
  if (scope.outermost()) {
    bool ok = r == cudaSuccess;
    on_device_alloc(Api::kCudaMallocPitch, ok, r == kRuntimeOom, ok ? ptr_value(*devPtr) : 0,
                    ok ? *pitch * height : width * height, r);
  }
  return r;
}

// A pitched 3D allocation is plain device memory of extent.height * extent.depth rows of `pitch` bytes.
MEMTRACE_EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent) {
  auto real = real_fn<decltype(&::cudaMalloc3D)>(kHook_cudaMalloc3D);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(pitchedDevPtr, extent);
  if (scope.outermost()) {
    bool ok = r == cudaSuccess;
    uint64_t rows = uint64_t{extent.height} * extent.depth;
    record_context_alloc({.layer = Layer::kDriver,
                          .api = Api::kCudaMalloc3D,
                          .device = current_device(),
                          .address = ok ? ptr_value(pitchedDevPtr->ptr) : 0,
                          .size = (ok ? pitchedDevPtr->pitch : extent.width) * rows,
                          .result = r},
                         ok, r == kRuntimeOom);
  }
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  auto real = real_fn<decltype(&::cudaMallocManaged)>(kHook_cudaMallocManaged);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(devPtr, size, flags);
  if (scope.outermost())
    record_context_alloc({.layer = Layer::kDriver,
                          .api = Api::kCudaMallocManaged,
                          .device = current_device(),
                          .address = devPtr ? ptr_value(*devPtr) : 0,
                          .size = size,
                          .result = r,
                          .memory = Memory::kManaged},
                         r == cudaSuccess, r == kRuntimeOom);
  return r;
}

// Stream-ordered allocations are blocks of the device's memory pool: LAYER_BLOCK (see memtrace.proto). Made
// while their stream is being captured, they are memory nodes of the graph being built (capture_id).
namespace {
// cudaMallocAsync and its _ptsz twin (`per_thread_stream`), which has the same ABI.
[[gnu::always_inline]] inline cudaError_t malloc_async(HookId id, bool per_thread_stream, void** devPtr, size_t size,
                                                       cudaStream_t stream) {
  auto real = real_fn<decltype(&::cudaMallocAsync)>(id);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(devPtr, size, stream);
  if (scope.outermost())
    record_async_alloc({.layer = Layer::kBlock,
                        .api = Api::kCudaMallocAsync,
                        .device = kDeviceUnresolved,
                        .stream = stream_value(stream),
                        .address = devPtr ? ptr_value(*devPtr) : 0,
                        .size = size,
                        .result = r},
                       r == cudaSuccess, r == kRuntimeOom, per_thread_stream);
  return r;
}
}  // namespace

MEMTRACE_EXPORT cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t stream) {
  return malloc_async(kHook_cudaMallocAsync, false, devPtr, size, stream);
}

MEMTRACE_EXPORT cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream) {
  return malloc_async(kHook_cudaMallocAsync_ptsz, true, devPtr, size, stream);
}

namespace {
[[gnu::always_inline]] inline cudaError_t free_async(HookId id, bool per_thread_stream, void* devPtr,
                                                     cudaStream_t stream) {
  auto real = real_fn<decltype(&::cudaFreeAsync)>(id);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  FreeEvent event(scope,
                  async_free(scope, Api::kCudaFreeAsync, ptr_value(devPtr), stream_value(stream), per_thread_stream));
  cudaError_t r = real(devPtr, stream);
  event.done(r);
  return r;
}
}  // namespace

MEMTRACE_EXPORT cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t stream) {
  return free_async(kHook_cudaFreeAsync, false, devPtr, stream);
}

MEMTRACE_EXPORT cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream) {
  return free_async(kHook_cudaFreeAsync_ptsz, true, devPtr, stream);
}

namespace {
[[gnu::always_inline]] inline cudaError_t malloc_from_pool(HookId id, bool per_thread_stream, void** ptr, size_t size,
                                                           cudaMemPool_t pool, cudaStream_t stream) {
  auto real = real_fn<decltype(&::cudaMallocFromPoolAsync)>(id);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(ptr, size, pool, stream);
  if (scope.outermost()) {
    bool ok = r == cudaSuccess;
    uint64_t address = ok && ptr ? ptr_value(*ptr) : 0;
    record_async_alloc({.layer = Layer::kBlock,
                        .api = Api::kCudaMallocFromPoolAsync,
                        .device = pool_block_device(ok, address),
                        .stream = stream_value(stream),
                        .address = address,
                        .size = size,
                        .result = r},
                       ok, r == kRuntimeOom, per_thread_stream);
  }
  return r;
}
}  // namespace

MEMTRACE_EXPORT cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  return malloc_from_pool(kHook_cudaMallocFromPoolAsync, false, ptr, size, pool, stream);
}

MEMTRACE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool,
                                                         cudaStream_t stream) {
  return malloc_from_pool(kHook_cudaMallocFromPoolAsync_ptsz, true, ptr, size, pool, stream);
}

// ---- CUDA runtime: host memory ---------------------------------------------------------------------------
// Page-locked host memory is never charged to a GPU; `device` is the current one, for the record only.

MEMTRACE_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  auto real = real_fn<decltype(&::cudaMallocHost)>(kHook_cudaMallocHost);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(ptr, size);
  if (scope.outermost())
    record_context_alloc({.layer = Layer::kDriver,
                          .api = Api::kCudaMallocHost,
                          .device = current_device(),
                          .address = ptr ? ptr_value(*ptr) : 0,
                          .size = size,
                          .result = r,
                          .memory = Memory::kHostPinned},
                         r == cudaSuccess, r == kRuntimeOom);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  auto real = real_fn<decltype(&::cudaHostAlloc)>(kHook_cudaHostAlloc);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(ptr, size, flags);
  if (scope.outermost())
    record_context_alloc({.layer = Layer::kDriver,
                          .api = Api::kCudaHostAlloc,
                          .device = current_device(),
                          .address = ptr ? ptr_value(*ptr) : 0,
                          .size = size,
                          .result = r,
                          .memory = Memory::kHostPinned},
                         r == cudaSuccess, r == kRuntimeOom);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  auto real = real_fn<decltype(&::cudaFreeHost)>(kHook_cudaFreeHost);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  FreeEvent event(scope, Api::kCudaFreeHost, Layer::kDriver, ptr_value(ptr), 0);
  cudaError_t r = real(ptr);
  event.done(r);
  return r;
}

// Registering page-locks memory the program already has: the registered range is what the event names.
MEMTRACE_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  auto real = real_fn<decltype(&::cudaHostRegister)>(kHook_cudaHostRegister);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(ptr, size, flags);
  if (scope.outermost())
    record_alloc({.layer = Layer::kDriver,
                  .api = Api::kCudaHostRegister,
                  .device = current_device(),
                  .address = ptr_value(ptr),
                  .size = size,
                  .result = r,
                  .memory = Memory::kHostRegistered},
                 r == cudaSuccess, false);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaHostUnregister(void* ptr) {
  auto real = real_fn<decltype(&::cudaHostUnregister)>(kHook_cudaHostUnregister);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  FreeEvent event(scope, Api::kCudaHostUnregister, Layer::kDriver, ptr_value(ptr), 0);
  cudaError_t r = real(ptr);
  event.done(r);
  return r;
}

// ---- CUDA runtime: arrays ----------------------------------------------------------------------------------
// A runtime array handle is the driver's (cudaArray_t and CUarray name the same object). Its size is what
// the driver set aside where it says (deferred-mapping arrays only), else its elements' bytes, which is also
// the size of a request that failed (array_bytes.h).

namespace {
uint64_t runtime_element_bytes(const cudaChannelFormatDesc* desc) {
  return desc ? runtime_format_element_bytes(desc->x, desc->y, desc->z, desc->w) : 0;
}

// An array made (`r`) with `array_out` its handle: sized by the driver when it can say (`driver_bytes` on the
// handle; deferred-mapping arrays only), else `element_bytes`.
template <typename Handle>
[[gnu::always_inline]] inline void record_array(Api api, cudaError_t r, Handle* array_out,
                                                uint64_t (*driver_bytes)(Handle, int), uint64_t element_bytes) {
  bool ok = r == cudaSuccess;
  int device = current_device();
  uint64_t bytes = ok ? driver_bytes(*array_out, device) : 0;
  record_context_alloc({.layer = Layer::kDriver,
                        .api = api,
                        .device = device,
                        .address = ok ? ptr_value(*array_out) : 0,
                        .size = bytes ? bytes : element_bytes,
                        .result = r,
                        .memory = Memory::kArray},
                       ok, r == kRuntimeOom);
}
}  // namespace

MEMTRACE_EXPORT cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width,
                                            size_t height, unsigned int flags) {
  auto real = real_fn<decltype(&::cudaMallocArray)>(kHook_cudaMallocArray);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(array, desc, width, height, flags);
  if (scope.outermost())
    record_array(Api::kCudaMallocArray, r, reinterpret_cast<CUarray*>(array), array_bytes,
                 array_element_bytes(width, height, 0, runtime_element_bytes(desc), 1));
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                                              unsigned int flags) {
  auto real = real_fn<decltype(&::cudaMalloc3DArray)>(kHook_cudaMalloc3DArray);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(array, desc, extent, flags);
  if (scope.outermost())
    record_array(Api::kCudaMalloc3DArray, r, reinterpret_cast<CUarray*>(array), array_bytes,
                 array_element_bytes(extent.width, extent.height, extent.depth, runtime_element_bytes(desc), 1));
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t* array, const cudaChannelFormatDesc* desc,
                                                     cudaExtent extent, unsigned int levels, unsigned int flags) {
  auto real = real_fn<decltype(&::cudaMallocMipmappedArray)>(kHook_cudaMallocMipmappedArray);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(array, desc, extent, levels, flags);
  if (scope.outermost())
    record_array(Api::kCudaMallocMipmappedArray, r, reinterpret_cast<CUmipmappedArray*>(array), mipmapped_array_bytes,
                 array_element_bytes(extent.width, extent.height, extent.depth, runtime_element_bytes(desc), levels));
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaFreeArray(cudaArray_t array) {
  auto real = real_fn<decltype(&::cudaFreeArray)>(kHook_cudaFreeArray);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  FreeEvent event(scope, Api::kCudaFreeArray, Layer::kDriver, ptr_value(array), 0);
  cudaError_t r = real(array);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t array) {
  auto real = real_fn<decltype(&::cudaFreeMipmappedArray)>(kHook_cudaFreeMipmappedArray);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  FreeEvent event(scope, Api::kCudaFreeMipmappedArray, Layer::kDriver, ptr_value(array), 0);
  cudaError_t r = real(array);
  event.done(r);
  return r;
}

// ---- CUDA runtime: imports and teardown --------------------------------------------------------------------

// Another process's allocation mapped here: its size is the range the driver mapped.
MEMTRACE_EXPORT cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  auto real = real_fn<decltype(&::cudaIpcOpenMemHandle)>(kHook_cudaIpcOpenMemHandle);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(devPtr, handle, flags);
  if (scope.outermost() && r == cudaSuccess) record_import(Api::kCudaIpcOpenMemHandle, ptr_value(*devPtr));
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  auto real = real_fn<decltype(&::cudaIpcCloseMemHandle)>(kHook_cudaIpcCloseMemHandle);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  FreeEvent event(scope, Api::kCudaIpcCloseMemHandle, Layer::kDriver, ptr_value(devPtr), 0);
  cudaError_t r = real(devPtr);
  event.done(r);
  return r;
}

// Destroys the current device's primary context, and with it what the driver frees with a context.
MEMTRACE_EXPORT cudaError_t cudaDeviceReset() {
  auto real = real_fn<decltype(&::cudaDeviceReset)>(kHook_cudaDeviceReset);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  if (scope.outermost()) {
    int device = current_device();
    record_context_destroy(Api::kCudaDeviceReset, device, primary_context(device));
  }
  return real();
}

// ---- CUDA runtime: graph memory ----------------------------------------------------------------------------

namespace {
[[gnu::always_inline]] inline cudaError_t end_capture(HookId id, bool per_thread_stream, cudaStream_t stream,
                                                      cudaGraph_t* graph) {
  auto real = real_fn<decltype(&::cudaStreamEndCapture)>(id);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  uint64_t capture_id = scope.outermost() ? stream_capture_id(stream_value(stream), per_thread_stream) : 0;
  cudaError_t r = real(stream, graph);
  if (r == cudaSuccess) record_graph_captured(Api::kCudaStreamEndCapture, stream_value(stream), graph, capture_id);
  return r;
}

// The four instantiations differ in their last argument only: flags or a parameter block.
template <typename Options>
[[gnu::always_inline]] inline cudaError_t instantiate(HookId id, cudaGraphExec_t* exec, cudaGraph_t graph,
                                                      Options options) {
  auto real = real_fn<cudaError_t (*)(cudaGraphExec_t*, cudaGraph_t, Options)>(id);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(exec, graph, options);
  if (scope.outermost() && r == cudaSuccess && exec)
    record_instantiate(Api::kCudaGraphInstantiate, ptr_value(*exec), ptr_value(graph));
  return r;
}

[[gnu::always_inline]] inline cudaError_t graph_launch(HookId id, cudaGraphExec_t exec, cudaStream_t stream) {
  auto real = real_fn<decltype(&::cudaGraphLaunch)>(id);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(exec, stream);
  if (scope.outermost() && r == cudaSuccess)
    record_launch(Api::kCudaGraphLaunch, ptr_value(exec), stream_value(stream));
  return r;
}
}  // namespace

MEMTRACE_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return end_capture(kHook_cudaStreamEndCapture, false, stream, graph);
}

MEMTRACE_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  return end_capture(kHook_cudaStreamEndCapture_ptsz, true, stream, graph);
}

MEMTRACE_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return instantiate(kHook_cudaGraphInstantiate, exec, graph, flags);
}

MEMTRACE_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                          unsigned long long flags) {
  return instantiate(kHook_cudaGraphInstantiateWithFlags, exec, graph, flags);
}

MEMTRACE_EXPORT cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                           cudaGraphInstantiateParams* params) {
  return instantiate(kHook_cudaGraphInstantiateWithParams, exec, graph, params);
}

MEMTRACE_EXPORT cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                                cudaGraphInstantiateParams* params) {
  return instantiate(kHook_cudaGraphInstantiateWithParams_ptsz, exec, graph, params);
}

MEMTRACE_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return graph_launch(kHook_cudaGraphLaunch, exec, stream);
}

MEMTRACE_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  return graph_launch(kHook_cudaGraphLaunch_ptsz, exec, stream);
}

MEMTRACE_EXPORT cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                     const cudaGraphNode_t* dependencies, size_t count,
                                                     cudaMemAllocNodeParams* params) {
  auto real = real_fn<decltype(&::cudaGraphAddMemAllocNode)>(kHook_cudaGraphAddMemAllocNode);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(node, graph, dependencies, count, params);
  if (scope.outermost() && r == cudaSuccess)
    record_alloc_node(Api::kCudaGraphAddMemAllocNode, ptr_value(graph), params->poolProps.location.id,
                      ptr_value(params->dptr), params->bytesize);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* node, cudaGraph_t graph,
                                                    const cudaGraphNode_t* dependencies, size_t count, void* dptr) {
  auto real = real_fn<decltype(&::cudaGraphAddMemFreeNode)>(kHook_cudaGraphAddMemFreeNode);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(node, graph, dependencies, count, dptr);
  if (scope.outermost() && r == cudaSuccess)
    record_free_node(Api::kCudaGraphAddMemFreeNode, ptr_value(graph), ptr_value(dptr));
  return r;
}

// The hidden aliases of this file's hooks (hook_table.h: MEMTRACE_OWN_ALIAS).
#define MEMTRACE_RUNTIME_HOOK(symbol) MEMTRACE_OWN_ALIAS(symbol)
#define MEMTRACE_SAMPLING_HOOKS_ELSEWHERE
#include "hooks/hooks.def"
#undef MEMTRACE_SAMPLING_HOOKS_ELSEWHERE
