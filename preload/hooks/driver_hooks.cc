// The interposed CUDA driver entry points of hooks.def's driver section: exported for programs linked with
// -lcuda and handed out by the resolver (dlsym, cuGetProcAddress) for the rest. Each forwards to the real
// function and, if it is the outermost hook on this thread, records what the call did (hook_events.h). Never
// a call into a public CUDA entry point: only the real pointers of the hook table. The sampling hooks
// (synchronizations, pool calls) are in sync_hooks.cc.
#include "hooks/driver_events.h"
#include "hooks/hook_events.h"
#include "hooks/hook_table.h"
#include "hooks/resolver.h"
#include "record/recorder.h"

using namespace memtrace;

// ---- CUDA driver: device memory ----------------------------------------------------------------------------

MEMTRACE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  auto real = real_fn<decltype(&::cuMemAlloc_v2)>(kHook_cuMemAlloc_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (nested_in_hook()) return real(dptr, bytesize);  // cudaMalloc's own call: the runtime hook records it
  HookScope scope;
  CUresult r = real(dptr, bytesize);
  if (scope.outermost()) driver_mem_alloc_done(r, dptr, bytesize);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                            unsigned int elementSizeBytes) {
  auto real = real_fn<decltype(&::cuMemAllocPitch_v2)>(kHook_cuMemAllocPitch_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(dptr, pitch, width, height, elementSizeBytes);
  if (scope.outermost()) driver_mem_alloc_pitch_done(r, dptr, pitch, width, height);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  auto real = real_fn<decltype(&::cuMemFree_v2)>(kHook_cuMemFree_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (nested_in_hook()) return real(dptr);  // cudaFree's own call: the runtime hook records it
  HookScope scope;
  if (note_device_free_if_dormant(dptr)) return real(dptr);  // as cudaFree's
  FreeEvent event(scope, Api::kCuMemFree, Layer::kDriver, dptr, 0);
  CUresult r = real(dptr);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  auto real = real_fn<decltype(&::cuMemAllocManaged)>(kHook_cuMemAllocManaged);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(dptr, bytesize, flags);
  if (scope.outermost()) driver_mem_alloc_managed_done(r, dptr, bytesize);
  return r;
}

namespace {
// Each stream-ordered call and its _ptsz twin (`per_thread_stream`), which has the same ABI.
[[gnu::always_inline]] inline CUresult alloc_async(HookId id, bool per_thread_stream, CUdeviceptr* dptr,
                                                   size_t bytesize, CUstream stream) {
  auto real = real_fn<decltype(&::cuMemAllocAsync)>(id);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(dptr, bytesize, stream);
  if (scope.outermost()) driver_mem_alloc_async_done(r, dptr, bytesize, stream, per_thread_stream);
  return r;
}

[[gnu::always_inline]] inline CUresult alloc_from_pool(HookId id, bool per_thread_stream, CUdeviceptr* dptr,
                                                       size_t bytesize, CUmemoryPool pool, CUstream stream) {
  auto real = real_fn<decltype(&::cuMemAllocFromPoolAsync)>(id);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(dptr, bytesize, pool, stream);
  if (scope.outermost()) driver_mem_alloc_from_pool_done(r, dptr, bytesize, stream, per_thread_stream);
  return r;
}

[[gnu::always_inline]] inline CUresult free_async(HookId id, bool per_thread_stream, CUdeviceptr dptr,
                                                  CUstream stream) {
  auto real = real_fn<decltype(&::cuMemFreeAsync)>(id);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  FreeEvent event(scope, async_free(scope, Api::kCuMemFreeAsync, dptr, stream_value(stream), per_thread_stream));
  CUresult r = real(dptr, stream);
  event.done(r);
  return r;
}
}  // namespace

MEMTRACE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return alloc_async(kHook_cuMemAllocAsync, false, dptr, bytesize, stream);
}

MEMTRACE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return alloc_async(kHook_cuMemAllocAsync_ptsz, true, dptr, bytesize, stream);
}

MEMTRACE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream stream) {
  return alloc_from_pool(kHook_cuMemAllocFromPoolAsync, false, dptr, bytesize, pool, stream);
}

MEMTRACE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                      CUstream stream) {
  return alloc_from_pool(kHook_cuMemAllocFromPoolAsync_ptsz, true, dptr, bytesize, pool, stream);
}

MEMTRACE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  return free_async(kHook_cuMemFreeAsync, false, dptr, stream);
}

MEMTRACE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return free_async(kHook_cuMemFreeAsync_ptsz, true, dptr, stream);
}

// ---- CUDA driver: virtual memory management ----------------------------------------------------------------
// cuMemCreate is physical memory (keyed by its handle); map/unmap and address reservations are recorded for
// the analyzer but are not memory of their own.

MEMTRACE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                     unsigned long long flags) {
  auto real = real_fn<decltype(&::cuMemCreate)>(kHook_cuMemCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(handle, size, prop, flags);
  if (scope.outermost()) driver_mem_create_done(r, handle, size, prop);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto real = real_fn<decltype(&::cuMemRelease)>(kHook_cuMemRelease);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  FreeEvent event(scope, Api::kCuMemRelease, Layer::kDriver, handle, 0);
  CUresult r = real(handle);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                  unsigned long long flags) {
  auto real = real_fn<decltype(&::cuMemMap)>(kHook_cuMemMap);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(ptr, size, offset, handle, flags);
  if (scope.outermost()) driver_mem_map_done(r, ptr, size, handle);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  auto real = real_fn<decltype(&::cuMemUnmap)>(kHook_cuMemUnmap);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(ptr, size);
  if (scope.outermost()) driver_mem_unmap_done(r, ptr, size);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                             unsigned long long flags) {
  auto real = real_fn<decltype(&::cuMemAddressReserve)>(kHook_cuMemAddressReserve);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(ptr, size, alignment, addr, flags);
  if (scope.outermost()) driver_address_reserve_done(r, ptr, size);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  auto real = real_fn<decltype(&::cuMemAddressFree)>(kHook_cuMemAddressFree);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(ptr, size);
  if (scope.outermost()) driver_address_free_done(r, ptr, size);
  return r;
}

// ---- CUDA driver: host memory ------------------------------------------------------------------------------

MEMTRACE_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  auto real = real_fn<decltype(&::cuMemAllocHost_v2)>(kHook_cuMemAllocHost_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pp, bytesize);
  if (scope.outermost()) driver_host_alloc_done(Api::kCuMemAllocHost, r, pp, bytesize);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  auto real = real_fn<decltype(&::cuMemHostAlloc)>(kHook_cuMemHostAlloc);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pp, bytesize, flags);
  if (scope.outermost()) driver_host_alloc_done(Api::kCuMemHostAlloc, r, pp, bytesize);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemFreeHost(void* p) {
  auto real = real_fn<decltype(&::cuMemFreeHost)>(kHook_cuMemFreeHost);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  FreeEvent event(scope, Api::kCuMemFreeHost, Layer::kDriver, ptr_value(p), 0);
  CUresult r = real(p);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  auto real = real_fn<decltype(&::cuMemHostRegister_v2)>(kHook_cuMemHostRegister_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(p, bytesize, flags);
  if (scope.outermost()) driver_host_register_done(r, p, bytesize);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemHostUnregister(void* p) {
  auto real = real_fn<decltype(&::cuMemHostUnregister)>(kHook_cuMemHostUnregister);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  FreeEvent event(scope, Api::kCuMemHostUnregister, Layer::kDriver, ptr_value(p), 0);
  CUresult r = real(p);
  event.done(r);
  return r;
}

// ---- CUDA driver: arrays -----------------------------------------------------------------------------------
// Sized as the runtime's arrays are (see there; driver_events.cc).

MEMTRACE_EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  auto real = real_fn<decltype(&::cuArrayCreate_v2)>(kHook_cuArrayCreate_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(handle, desc);
  if (scope.outermost()) driver_array_create_done(r, handle, desc);
  return r;
}

MEMTRACE_EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  auto real = real_fn<decltype(&::cuArray3DCreate_v2)>(kHook_cuArray3DCreate_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(handle, desc);
  if (scope.outermost()) driver_array_3d_create_done(r, handle, desc);
  return r;
}

MEMTRACE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                unsigned int levels) {
  auto real = real_fn<decltype(&::cuMipmappedArrayCreate)>(kHook_cuMipmappedArrayCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(handle, desc, levels);
  if (scope.outermost()) driver_mipmapped_array_create_done(r, handle, desc, levels);
  return r;
}

MEMTRACE_EXPORT CUresult cuArrayDestroy(CUarray array) {
  auto real = real_fn<decltype(&::cuArrayDestroy)>(kHook_cuArrayDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  FreeEvent event(scope, Api::kCuArrayDestroy, Layer::kDriver, ptr_value(array), 0);
  CUresult r = real(array);
  event.done(r);
  return r;
}

MEMTRACE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  auto real = real_fn<decltype(&::cuMipmappedArrayDestroy)>(kHook_cuMipmappedArrayDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  FreeEvent event(scope, Api::kCuMipmappedArrayDestroy, Layer::kDriver, ptr_value(array), 0);
  CUresult r = real(array);
  event.done(r);
  return r;
}

// ---- CUDA driver: imports ----------------------------------------------------------------------------------

MEMTRACE_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  auto real = real_fn<decltype(&::cuIpcOpenMemHandle_v2)>(kHook_cuIpcOpenMemHandle_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pdptr, handle, flags);
  if (scope.outermost() && r == CUDA_SUCCESS) record_import(Api::kCuIpcOpenMemHandle, *pdptr);
  return r;
}

MEMTRACE_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  auto real = real_fn<decltype(&::cuIpcCloseMemHandle)>(kHook_cuIpcCloseMemHandle);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  FreeEvent event(scope, Api::kCuIpcCloseMemHandle, Layer::kDriver, dptr, 0);
  CUresult r = real(dptr);
  event.done(r);
  return r;
}

// A buffer of external memory (Vulkan, D3D, NvSciBuf...) mapped into this address space; cuMemFree ends it.
MEMTRACE_EXPORT CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr* devPtr, CUexternalMemory extMem,
                                                         const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* bufferDesc) {
  auto real = real_fn<decltype(&::cuExternalMemoryGetMappedBuffer)>(kHook_cuExternalMemoryGetMappedBuffer);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(devPtr, extMem, bufferDesc);
  if (scope.outermost() && r == CUDA_SUCCESS)
    record_event({.kind = EventKind::kAlloc,
                  .layer = Layer::kDriver,
                  .api = Api::kCuExternalMemoryGetMappedBuffer,
                  .device = current_device(),
                  .address = *devPtr,
                  .size = bufferDesc->size,
                  .memory = Memory::kImported});
  return r;
}

// An allocation handle of another process: the same handle space as cuMemCreate's, so its maps, unmaps and
// release pair with it. Its size is not known here (0).
MEMTRACE_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                        CUmemAllocationHandleType type) {
  auto real = real_fn<decltype(&::cuMemImportFromShareableHandle)>(kHook_cuMemImportFromShareableHandle);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(handle, osHandle, type);
  if (scope.outermost() && r == CUDA_SUCCESS)
    record_event({.kind = EventKind::kAlloc,
                  .layer = Layer::kDriver,
                  .api = Api::kCuMemImportFromShareableHandle,
                  .device = device_of_handle(*handle),
                  .address = *handle,
                  .memory = Memory::kImported});
  return r;
}

// ---- CUDA driver: context teardown -------------------------------------------------------------------------
// The release of a primary context's last reference (cuDevicePrimaryCtxRelease) destroys it too, but the
// reference count is the driver's secret: not recorded.

MEMTRACE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  auto real = real_fn<decltype(&::cuCtxDestroy_v2)>(kHook_cuCtxDestroy_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  if (scope.outermost()) record_context_destroy(Api::kCuCtxDestroy, device_of_context(ctx), ptr_value(ctx));
  return real(ctx);
}

// The ABI of CUDA 11.0 and that of CUDA 7.0, which the CUDA 13 runtime asks for (hooks.def).
namespace {
[[gnu::always_inline]] inline CUresult primary_ctx_reset(HookId id, CUdevice dev) {
  auto real = real_fn<decltype(&::cuDevicePrimaryCtxReset_v2)>(id);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  if (scope.outermost()) record_context_destroy(Api::kCuDevicePrimaryCtxReset, dev, primary_context(dev));
  return real(dev);
}
}  // namespace

MEMTRACE_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return primary_ctx_reset(kHook_cuDevicePrimaryCtxReset_v2, dev);
}

MEMTRACE_EXPORT CUresult memtrace_cuDevicePrimaryCtxReset_v7000(CUdevice dev) {
  return primary_ctx_reset(kHook_memtrace_cuDevicePrimaryCtxReset_v7000, dev);
}

// Every retain is remembered, nested in another hook or not (the runtime retains inside cudaMalloc and
// cudaSetDevice): the handle is a fact about the device, not an event.
MEMTRACE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  auto real = real_fn<decltype(&::cuDevicePrimaryCtxRetain)>(kHook_cuDevicePrimaryCtxRetain);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pctx, dev);
  if (r == CUDA_SUCCESS && pctx) remember_primary_context(dev, ptr_value(*pctx));
  return r;
}

// ---- CUDA driver: graph memory -----------------------------------------------------------------------------

namespace {
[[gnu::always_inline]] inline CUresult end_capture(HookId id, bool per_thread_stream, CUstream stream, CUgraph* graph) {
  auto real = real_fn<decltype(&::cuStreamEndCapture)>(id);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  uint64_t capture_id = scope.outermost() ? stream_capture_id(stream_value(stream), per_thread_stream) : 0;
  CUresult r = real(stream, graph);
  if (r == CUDA_SUCCESS) record_graph_captured(Api::kCuStreamEndCapture, stream_value(stream), graph, capture_id);
  return r;
}

// The four instantiations differ in their last argument only: flags or a parameter block.
template <typename Options>
[[gnu::always_inline]] inline CUresult instantiate(HookId id, CUgraphExec* exec, CUgraph graph, Options options) {
  auto real = real_fn<CUresult (*)(CUgraphExec*, CUgraph, Options)>(id);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(exec, graph, options);
  if (scope.outermost() && r == CUDA_SUCCESS && exec)
    record_instantiate(Api::kCuGraphInstantiate, ptr_value(*exec), ptr_value(graph));
  return r;
}

[[gnu::always_inline]] inline CUresult graph_launch(HookId id, CUgraphExec exec, CUstream stream) {
  auto real = real_fn<decltype(&::cuGraphLaunch)>(id);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(exec, stream);
  if (scope.outermost() && r == CUDA_SUCCESS) record_launch(Api::kCuGraphLaunch, ptr_value(exec), stream_value(stream));
  return r;
}
}  // namespace

MEMTRACE_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  return end_capture(kHook_cuStreamEndCapture, false, stream, graph);
}

MEMTRACE_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  return end_capture(kHook_cuStreamEndCapture_ptsz, true, stream, graph);
}

MEMTRACE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  return instantiate(kHook_cuGraphInstantiateWithFlags, exec, graph, flags);
}

MEMTRACE_EXPORT CUresult memtrace_cuGraphInstantiate_v12000(CUgraphExec* exec, CUgraph graph,
                                                            unsigned long long flags) {
  return instantiate(kHook_memtrace_cuGraphInstantiate_v12000, exec, graph, flags);
}

MEMTRACE_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate(kHook_cuGraphInstantiateWithParams, exec, graph, params);
}

MEMTRACE_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate(kHook_cuGraphInstantiateWithParams_ptsz, exec, graph, params);
}

MEMTRACE_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  return graph_launch(kHook_cuGraphLaunch, exec, stream);
}

MEMTRACE_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return graph_launch(kHook_cuGraphLaunch_ptsz, exec, stream);
}

MEMTRACE_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                                size_t count, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  auto real = real_fn<decltype(&::cuGraphAddMemAllocNode)>(kHook_cuGraphAddMemAllocNode);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(node, graph, dependencies, count, params);
  if (scope.outermost() && r == CUDA_SUCCESS)
    record_alloc_node(Api::kCuGraphAddMemAllocNode, ptr_value(graph), params->poolProps.location.id, params->dptr,
                      params->bytesize);
  return r;
}

MEMTRACE_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                                               size_t count, CUdeviceptr dptr) {
  auto real = real_fn<decltype(&::cuGraphAddMemFreeNode)>(kHook_cuGraphAddMemFreeNode);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(node, graph, dependencies, count, dptr);
  if (scope.outermost() && r == CUDA_SUCCESS) record_free_node(Api::kCuGraphAddMemFreeNode, ptr_value(graph), dptr);
  return r;
}

// The hidden aliases of this file's hooks (hook_table.h: MEMTRACE_OWN_ALIAS). The MEMTRACE_DRIVER_PROC entries
// need none: their names are our own already.
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) MEMTRACE_OWN_ALIAS(symbol)
#define MEMTRACE_SAMPLING_HOOKS_ELSEWHERE
#include "hooks/hooks.def"
#undef MEMTRACE_SAMPLING_HOOKS_ELSEWHERE
