// Shared between hooks.cc (the wrappers) and resolver.cc (how wrappers are handed out): the table of
// interposed functions generated from hooks.def, each with the real function it forwards to.
#pragma once
#include <atomic>
#include <cstdint>

// The CUDA headers are included with default visibility so that our definitions of the declared entry
// points are exported; everything else in the library is hidden (and exports.map lists only the hooks).
#pragma GCC visibility push(default)
#include <cuda.h>
#include <cuda_runtime_api.h>
extern "C" {
// Per-thread-default-stream variants: declared by the CUDA headers only when a program opts into them.
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams* instantiateParams);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams);
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);
void* dlsym(void* handle, const char* name) noexcept;
}
#pragma GCC visibility pop

extern "C" {
// cuGetProcAddress("cuGraphInstantiate") from CUDA 12.0: cuGraphInstantiateWithFlags' ABI (hooks.def).
CUresult memtrace_cuGraphInstantiate_v12000(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags);
// cuGetProcAddress("cuDevicePrimaryCtxReset") below 11000: CUDA 7.0's function (hooks.def).
CUresult memtrace_cuDevicePrimaryCtxReset_v7000(CUdevice dev);
}

namespace memtrace {

enum HookId : int {
#define MEMTRACE_RUNTIME_HOOK(symbol) kHook_##symbol,
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) kHook_##symbol,
#define MEMTRACE_DRIVER_PROC(symbol, base_name, min_version, per_thread_stream) kHook_##symbol,
#include "hooks.def"
  kHookCount
};

// A hook is reached two ways, and each must forward to a different function:
//  - kExported: a program called our exported symbol by name. The next definition in the symbol search
//    order comes after us: another preloaded tool's, or the CUDA library's.
//  - kHandedOut: our dlsym / cuGetProcAddress wrapper handed our function out in place of the one the
//    driver or runtime returned, which is where it must forward.
enum class HookPath : uint8_t { kExported, kHandedOut };

struct HookSlot {
  const char* symbol;            // exported name
  const char* base_name;         // name asked of cuGetProcAddress; null for runtime functions
  int min_version;               // lowest CUDA version (as cuGetProcAddress takes it) whose ABI this is
  bool per_thread_stream;        // the _ptsz variant
  void* handed_out;              // what we hand out: a hidden entry point that forwards to `real`
  std::atomic<void*> real;       // kHandedOut: the function the driver / runtime returned
  std::atomic<void*> real_next;  // kExported: the next definition after ours
};

extern HookSlot g_hooks[kHookCount];

// The function hook `id` forwards to on `path`. kExported: dlsym(RTLD_NEXT), else the symbol on
// libcudart.so.13 / libcuda.so.1 when already loaded (torch loads them RTLD_LOCAL, where RTLD_NEXT does
// not look). kHandedOut: what was recorded when it was handed out. Null when none is found.
void* hook_real(HookId id, HookPath path);

// The path of the hook being entered on this thread: set by the handed-out entry points, read (and reset)
// once by the hook body.
HookPath take_hook_path();

// If `real` is the function behind one of our hooks (by exported name), remembers it and returns our
// wrapper; otherwise returns `real`. Also remembers the driver helpers below.
void* substitute_by_symbol(const char* symbol, void* real);

// Driver functions the hooks call for facts about what they saw: the driver's own, never a public entry
// point of ours (the resolver remembers what cuGetProcAddress / dlsym returned for them, see resolver.cc).
// Each answers "unknown" (-1 / false) when the driver is not reachable or refuses.

// Driver functions the tracer asks for facts, never handed out (resolver.cc's g_helpers has one row each:
// the cuGetProcAddress name and version range of the ABI used).
enum HelperId : int {
  kCtxGetDevice,
  kCtxGetDeviceOfContext,
  kMemGetInfo,
  kPointerGetAttribute,
  kArrayGetMemoryRequirements,
  kMipmappedArrayGetMemoryRequirements,
  kMemGetAddressRange,
  kMemGetAllocationPropertiesFromHandle,
  kStreamGetCaptureInfo,
  kCtxGetCurrent,
  kMemPoolGetAttribute,
  kDeviceGetMemPool,
  kDeviceGetGraphMemAttribute,
  kDeviceGetPCIBusId,
  kDeviceGetUuid,
  kDeviceGetName,
  kDeviceTotalMem,
  kHelperCount
};

// The driver's own function `id`: the one the runtime looked up or a program dlsym()ed, else found in
// libcuda.so.1 by its exported name; null when the driver is not loaded or lacks it.
void* driver_helper(HelperId id);

// cuCtxGetDevice: the calling thread's current device.
int current_device();
// cuCtxGetCurrent: the calling thread's current CUcontext, as an integer (0 when none or unknown). The
// context an allocation is made in is the one whose destruction frees it (memtrace.proto: Event.context).
uint64_t current_context();
// cuMemGetInfo_v2: free and total bytes of the current device.
bool device_memory_info(uint64_t* free_bytes, uint64_t* total_bytes);
// The device ordinal `address` belongs to (cuPointerGetAttribute, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), for
// allocations from an explicit pool, which may belong to any device; `fallback` when the driver cannot say.
int device_of_pointer(uint64_t address, int fallback);
// The device of `context` (cuCtxGetDevice_v2 of CUDA 13.0; older drivers lack it: then the current
// device, if `context` is the current context). -1 when unknown.
int device_of_context(CUcontext context);
// Bytes the driver set aside for a CUDA array / mipmapped array on `device`
// (cuArrayGetMemoryRequirements / cuMipmappedArrayGetMemoryRequirements, CUDA 11.6: `size` of
// CUDA_ARRAY_MEMORY_REQUIREMENTS). 0 when unknown, which is every array made without
// CUDA_ARRAY3D_DEFERRED_MAPPING (see array_bytes.h).
uint64_t array_bytes(CUarray array, int device);
uint64_t mipmapped_array_bytes(CUmipmappedArray array, int device);
// Size of the allocation that starts at `address` (cuMemGetAddressRange_v2). 0 when unknown.
uint64_t allocation_range_bytes(uint64_t address);
// The device a VMM allocation handle's memory lives on (cuMemGetAllocationPropertiesFromHandle), -1 when
// it is not device memory or unknown.
int device_of_handle(uint64_t handle);
// The id of the stream capture `stream` is in (cuStreamGetCaptureInfo_v3: status ACTIVE), 0 when the
// stream is not capturing or the driver cannot say. One driver call. `per_thread_stream`: the call came
// through a _ptsz entry point, where stream 0 is the per-thread default stream, not the legacy one.
uint64_t stream_capture_id(uint64_t stream, bool per_thread_stream);

// glibc's dlsym, bypassing our interposed one.
void* real_dlsym(void* handle, const char* name);

// True when `fn` is code of libmemtrace.so itself (one of our exported wrappers).
bool is_own_function(const void* fn);

}  // namespace memtrace
