// The sampling hooks of hooks.def's last section: the calls at which a stream-ordered pool's reserved memory
// changes without an allocation (synchronizations, trims, pool creation and destruction) and the graph
// memory pool's trim. Each forwards, then samples through pool_sampler.h.
//
// Synchronizations are on the hot path of every training step: until a pool has been seen they only
// forward (one relaxed atomic load more than the call itself), and afterwards the sampler writes an event
// only for a pool whose reserved memory changed.
#include "hooks/hook_table.h"
#include "record/recorder.h"
#include "samplers/pool_sampler.h"

using namespace memtrace;

namespace {

uint64_t handle_value(const void* h) { return reinterpret_cast<uintptr_t>(h); }

// A pool's device, from the location in its properties; -1 for a pool of host memory (not device memory:
// it is not sampled).
int device_pool_location(const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE ? location.id : -1;
}

}  // namespace

namespace {
// Forwards; once a pool has been seen, samples every known pool after a successful synchronization (only
// the outermost hook: the runtime's synchronizations reach the driver's through our resolver too). `fail`:
// what the hook returns when no CUDA library is loaded; `ok`: the call's success.
template <typename Result, typename... Args>
[[gnu::always_inline]] inline Result synchronize(HookId id, Result fail, Result ok, Api api, Args... args) {
  auto real = real_fn<Result (*)(Args...)>(id);
  if (!real) return fail;
  if (!pools_seen()) return real(args...);
  HookScope scope;
  Result r = real(args...);
  if (scope.outermost() && r == ok) sample_known_pools(api);
  return r;
}
}  // namespace

// ---- driver ------------------------------------------------------------------------------------------------

MEMTRACE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  return synchronize(kHook_cuStreamSynchronize, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS, Api::kCuStreamSynchronize,
                     stream);
}
MEMTRACE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  return synchronize(kHook_cuStreamSynchronize_ptsz, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS,
                     Api::kCuStreamSynchronize, stream);
}
MEMTRACE_EXPORT CUresult cuCtxSynchronize() {
  return synchronize(kHook_cuCtxSynchronize, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS, Api::kCuCtxSynchronize);
}
MEMTRACE_EXPORT CUresult cuCtxSynchronize_v2(CUcontext context) {
  return synchronize(kHook_cuCtxSynchronize_v2, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS, Api::kCuCtxSynchronize,
                     context);
}
MEMTRACE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  return synchronize(kHook_cuEventSynchronize, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS, Api::kCuEventSynchronize,
                     event);
}

MEMTRACE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  auto real = real_fn<decltype(&::cuMemPoolCreate)>(kHook_cuMemPoolCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pool, props);
  if (scope.outermost() && r == CUDA_SUCCESS && props && device_pool_location(props->location) >= 0)
    pool_created(handle_value(*pool), device_pool_location(props->location), Api::kCuMemPoolCreate);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  auto real = real_fn<decltype(&::cuMemPoolDestroy)>(kHook_cuMemPoolDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pool);
  if (scope.outermost() && r == CUDA_SUCCESS) pool_destroyed(handle_value(pool), Api::kCuMemPoolDestroy);
  return r;
}

MEMTRACE_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t min_bytes_to_keep) {
  auto real = real_fn<decltype(&::cuMemPoolTrimTo)>(kHook_cuMemPoolTrimTo);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(pool, min_bytes_to_keep);
  if (scope.outermost() && r == CUDA_SUCCESS) sample_pool(handle_value(pool), -1, Api::kCuMemPoolTrimTo);
  return r;
}

MEMTRACE_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  auto real = real_fn<decltype(&::cuDeviceGraphMemTrim)>(kHook_cuDeviceGraphMemTrim);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  HookScope scope;
  CUresult r = real(device);
  if (scope.outermost() && r == CUDA_SUCCESS) sample_graph_pool(device, Api::kCuDeviceGraphMemTrim);
  return r;
}

// ---- runtime -----------------------------------------------------------------------------------------------

MEMTRACE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return synchronize(kHook_cudaStreamSynchronize, cudaErrorInitializationError, cudaSuccess,
                     Api::kCudaStreamSynchronize, stream);
}
MEMTRACE_EXPORT cudaError_t cudaDeviceSynchronize() {
  return synchronize(kHook_cudaDeviceSynchronize, cudaErrorInitializationError, cudaSuccess,
                     Api::kCudaDeviceSynchronize);
}
MEMTRACE_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return synchronize(kHook_cudaEventSynchronize, cudaErrorInitializationError, cudaSuccess, Api::kCudaEventSynchronize,
                     event);
}

MEMTRACE_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  auto real = real_fn<decltype(&::cudaMemPoolCreate)>(kHook_cudaMemPoolCreate);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(pool, props);
  if (scope.outermost() && r == cudaSuccess && props && props->location.type == cudaMemLocationTypeDevice)
    pool_created(handle_value(*pool), props->location.id, Api::kCudaMemPoolCreate);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  auto real = real_fn<decltype(&::cudaMemPoolDestroy)>(kHook_cudaMemPoolDestroy);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(pool);
  if (scope.outermost() && r == cudaSuccess) pool_destroyed(handle_value(pool), Api::kCudaMemPoolDestroy);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t min_bytes_to_keep) {
  auto real = real_fn<decltype(&::cudaMemPoolTrimTo)>(kHook_cudaMemPoolTrimTo);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(pool, min_bytes_to_keep);
  if (scope.outermost() && r == cudaSuccess) sample_pool(handle_value(pool), -1, Api::kCudaMemPoolTrimTo);
  return r;
}

MEMTRACE_EXPORT cudaError_t cudaDeviceGraphMemTrim(int device) {
  auto real = real_fn<decltype(&::cudaDeviceGraphMemTrim)>(kHook_cudaDeviceGraphMemTrim);
  if (!real) return cudaErrorInitializationError;
  HookScope scope;
  cudaError_t r = real(device);
  if (scope.outermost() && r == cudaSuccess) sample_graph_pool(device, Api::kCudaDeviceGraphMemTrim);
  return r;
}

// The hidden aliases of this file's hooks (hook_table.h: MEMTRACE_OWN_ALIAS).
#define MEMTRACE_RUNTIME_HOOK(symbol) MEMTRACE_OWN_ALIAS(symbol)
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) MEMTRACE_OWN_ALIAS(symbol)
#define MEMTRACE_SAMPLING_HOOKS_ONLY
#include "hooks/hooks.def"
#undef MEMTRACE_SAMPLING_HOOKS_ONLY
