// The table of interposed CUDA functions, expanded from hooks.def: each hook's id, the real function it
// forwards to, and the entry point the resolver hands out in place of the driver's or runtime's own.
// The hook files (runtime_hooks.cc, driver_hooks.cc, sync_hooks.cc) define the hooks; hook_table.cc holds
// the table; resolver.cc fills in the real functions.
#pragma once
#include <atomic>
#include <cstdint>

#include "hooks/export.h"
#include "record/tls.h"

// The CUDA headers are included with default visibility so that our definitions of the declared entry
// points are exported; everything else in the library is hidden (and the export list names only the hooks).
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

// A hook's hidden alias, memtrace_own_<symbol>: our own definition, whatever another preloaded library
// defines under the same name. The handed-out entry points (hook_table.cc) call it. An alias must be defined
// in the file of its target, so each hook file expands hooks.def with this for its own section.
#define MEMTRACE_OWN_ALIAS(symbol) \
  extern "C" decltype(::symbol) memtrace_own_##symbol __attribute__((alias(#symbol), visibility("hidden")));

namespace memtrace {

enum HookId : int {
#define MEMTRACE_RUNTIME_HOOK(symbol) kHook_##symbol,
#define MEMTRACE_DRIVER_HOOK(symbol, base_name, min_version, per_thread_stream) kHook_##symbol,
#define MEMTRACE_DRIVER_PROC(symbol, base_name, min_version, per_thread_stream) kHook_##symbol,
#include "hooks/hooks.def"
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

// The path of the hook being entered on this thread: set by the handed-out entry points (hook_table.cc),
// read (and reset) once by the hook body. Inline: every hook takes it first.
extern MEMTRACE_TLS HookPath t_hook_path;
inline HookPath take_hook_path() {
  HookPath path = t_hook_path;
  t_hook_path = HookPath::kExported;  // hooks nested in the real call are entered afresh
  return path;
}

// The function hook `id` forwards to on `path`. kExported: dlsym(RTLD_NEXT), else the symbol on
// libcudart.so.13 / libcuda.so.1 when already loaded (torch loads them RTLD_LOCAL, where RTLD_NEXT does
// not look). kHandedOut: what was recorded when it was handed out. Null when none is found. (resolver.cc)
void* hook_real(HookId id, HookPath path);

// The real function the hook being entered forwards to, as its own type `Fn` (decltype(&::symbol)); null
// when no CUDA library is loaded, when the hook returns its "not initialized" error. Each hook calls this
// first, once: it takes the path the hook was entered by.
// Inline: the pointer found already (every call but the first) costs a load or two, not a call; hook_real looks the
// rest up as before.
template <typename Fn>
Fn real_fn(HookId id) {
  const HookPath path = take_hook_path();
  const HookSlot& h = g_hooks[id];
  void* fn = path == HookPath::kHandedOut ? h.real.load(std::memory_order_acquire) : nullptr;
  if (!fn) fn = h.real_next.load(std::memory_order_acquire);
  if (!fn) fn = hook_real(id, path);
  return reinterpret_cast<Fn>(fn);
}

}  // namespace memtrace
