// The sampling hooks of hooks.def's last section: the calls at which a stream-ordered pool's reserved memory
// changes without an allocation (synchronizations, trims, pool creation and destruction) and the graph
// memory pool's trim. Each forwards, then samples through pool_sampler.h.
//
// Synchronizations are on the hot path of every training step: until a pool has been seen they only
// forward (one relaxed atomic load more than the call itself), and afterwards the sampler writes an event
// only for a pool whose reserved memory changed.
#include "hooks/hooks_internal.h"
#include "samplers/pool_sampler.h"
#include "record/recorder.h"

#define MEMTRACE_EXPORT __attribute__((visibility("default")))

// This file's hooks' hidden aliases (see hooks.cc: the entry points the resolver hands out call these, so a
// definition of the same name in another preloaded library never stands in for ours). An alias must be
// defined in the file of its target, so these are made here rather than in hooks.cc.
#define MEMTRACE_OWN_ALIAS(symbol) \
  extern "C" decltype(::symbol) memtrace_own_##symbol __attribute__((alias(#symbol), visibility("hidden")));

using namespace memtrace;

namespace {

template <typename Fn>
Fn real_fn(HookId id) {
  return reinterpret_cast<Fn>(hook_real(id, take_hook_path()));
}

uint64_t handle_value(const void* h) { return reinterpret_cast<uintptr_t>(h); }

// A pool's device, from the location in its properties; -1 for a pool of host memory (not device memory:
// it is not sampled).
int device_pool_location(const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE ? location.id : -1;
}

}  // namespace

// Forwards; once a pool has been seen, samples every known pool after a successful synchronization (only
// the outermost hook: the runtime's synchronizations reach the driver's through our resolver too).
#define MEMTRACE_SYNC_HOOK(ret, symbol, params, args, fail, ok, api) \
  MEMTRACE_EXPORT ret symbol params {                                \
    auto real = real_fn<decltype(&::symbol)>(kHook_##symbol);        \
    if (!real) return fail;                                          \
    if (!pools_seen()) return real args;                             \
    HookScope scope;                                                 \
    ret r = real args;                                               \
    if (scope.outermost() && r == ok) sample_known_pools(api);       \
    return r;                                                        \
  }                                                                  \
  MEMTRACE_OWN_ALIAS(symbol)

// ---- driver ------------------------------------------------------------------------------------------------

MEMTRACE_SYNC_HOOK(CUresult, cuStreamSynchronize, (CUstream stream), (stream), CUDA_ERROR_NOT_INITIALIZED,
                   CUDA_SUCCESS, Api::kCuStreamSynchronize)
MEMTRACE_SYNC_HOOK(CUresult, cuStreamSynchronize_ptsz, (CUstream stream), (stream), CUDA_ERROR_NOT_INITIALIZED,
                   CUDA_SUCCESS, Api::kCuStreamSynchronize)
MEMTRACE_SYNC_HOOK(CUresult, cuCtxSynchronize, (), (), CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS,
                   Api::kCuCtxSynchronize)
MEMTRACE_SYNC_HOOK(CUresult, cuCtxSynchronize_v2, (CUcontext context), (context), CUDA_ERROR_NOT_INITIALIZED,
                   CUDA_SUCCESS, Api::kCuCtxSynchronize)
MEMTRACE_SYNC_HOOK(CUresult, cuEventSynchronize, (CUevent event), (event), CUDA_ERROR_NOT_INITIALIZED,
                   CUDA_SUCCESS, Api::kCuEventSynchronize)

MEMTRACE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  auto real = real_fn<decltype(&::cuMemPoolCreate)>(kHook_cuMemPoolCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pool, props);
  if (scope.outermost() && r == CUDA_SUCCESS && props && device_pool_location(props->location) >= 0)
    pool_created(handle_value(*pool), device_pool_location(props->location), Api::kCuMemPoolCreate);
  return r;
}
MEMTRACE_OWN_ALIAS(cuMemPoolCreate)

MEMTRACE_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  auto real = real_fn<decltype(&::cuMemPoolDestroy)>(kHook_cuMemPoolDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pool);
  if (scope.outermost() && r == CUDA_SUCCESS) pool_destroyed(handle_value(pool), Api::kCuMemPoolDestroy);
  return r;
}
MEMTRACE_OWN_ALIAS(cuMemPoolDestroy)

MEMTRACE_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t min_bytes_to_keep) {
  auto real = real_fn<decltype(&::cuMemPoolTrimTo)>(kHook_cuMemPoolTrimTo);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pool, min_bytes_to_keep);
  if (scope.outermost() && r == CUDA_SUCCESS) sample_pool(handle_value(pool), -1, Api::kCuMemPoolTrimTo);
  return r;
}
MEMTRACE_OWN_ALIAS(cuMemPoolTrimTo)

MEMTRACE_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  auto real = real_fn<decltype(&::cuDeviceGraphMemTrim)>(kHook_cuDeviceGraphMemTrim);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(device);
  if (scope.outermost() && r == CUDA_SUCCESS) sample_graph_pool(device, Api::kCuDeviceGraphMemTrim);
  return r;
}
MEMTRACE_OWN_ALIAS(cuDeviceGraphMemTrim)

// ---- runtime -----------------------------------------------------------------------------------------------

MEMTRACE_SYNC_HOOK(cudaError_t, cudaStreamSynchronize, (cudaStream_t stream), (stream),
                   cudaErrorInitializationError, cudaSuccess, Api::kCudaStreamSynchronize)
MEMTRACE_SYNC_HOOK(cudaError_t, cudaDeviceSynchronize, (), (), cudaErrorInitializationError, cudaSuccess,
                   Api::kCudaDeviceSynchronize)
MEMTRACE_SYNC_HOOK(cudaError_t, cudaEventSynchronize, (cudaEvent_t event), (event), cudaErrorInitializationError,
                   cudaSuccess, Api::kCudaEventSynchronize)

MEMTRACE_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  auto real = real_fn<decltype(&::cudaMemPoolCreate)>(kHook_cudaMemPoolCreate);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(pool, props);
  if (scope.outermost() && r == cudaSuccess && props && props->location.type == cudaMemLocationTypeDevice)
    pool_created(handle_value(*pool), props->location.id, Api::kCudaMemPoolCreate);
  return r;
}
MEMTRACE_OWN_ALIAS(cudaMemPoolCreate)

MEMTRACE_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  auto real = real_fn<decltype(&::cudaMemPoolDestroy)>(kHook_cudaMemPoolDestroy);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(pool);
  if (scope.outermost() && r == cudaSuccess) pool_destroyed(handle_value(pool), Api::kCudaMemPoolDestroy);
  return r;
}
MEMTRACE_OWN_ALIAS(cudaMemPoolDestroy)

MEMTRACE_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t min_bytes_to_keep) {
  auto real = real_fn<decltype(&::cudaMemPoolTrimTo)>(kHook_cudaMemPoolTrimTo);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(pool, min_bytes_to_keep);
  if (scope.outermost() && r == cudaSuccess) sample_pool(handle_value(pool), -1, Api::kCudaMemPoolTrimTo);
  return r;
}
MEMTRACE_OWN_ALIAS(cudaMemPoolTrimTo)

MEMTRACE_EXPORT cudaError_t cudaDeviceGraphMemTrim(int device) {
  auto real = real_fn<decltype(&::cudaDeviceGraphMemTrim)>(kHook_cudaDeviceGraphMemTrim);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(device);
  if (scope.outermost() && r == cudaSuccess) sample_graph_pool(device, Api::kCudaDeviceGraphMemTrim);
  return r;
}
MEMTRACE_OWN_ALIAS(cudaDeviceGraphMemTrim)
