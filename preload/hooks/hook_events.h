// What a CUDA call means as a trace event: the hook files (runtime_hooks.cc, driver_hooks.cc) forward each
// call and describe what it did with these; they turn that into MemoryEvents for the recorder and ask the
// pool sampler and device sampler for the samples an event calls for. Sizes in bytes; `device` is a CUDA
// device ordinal (-1 unknown); addresses, streams, graphs and contexts are the handles' values.
// Called by the outermost hook only (HookScope), on the calling thread, never under a lock.
#pragma once
#include <cstdint>

#include "hooks/hook_table.h"
#include "record/lifecycle.h"
#include "record/recorder.h"

namespace memtrace {

constexpr int kRuntimeOom = cudaErrorMemoryAllocation;
constexpr int kDriverOom = CUDA_ERROR_OUT_OF_MEMORY;

inline uint64_t ptr_value(const void* p) { return reinterpret_cast<uintptr_t>(p); }
inline uint64_t stream_value(const void* s) { return reinterpret_cast<uintptr_t>(s); }

// A host location (CU_MEM_LOCATION_TYPE_HOST, _HOST_NUMA, _HOST_NUMA_CURRENT) makes page-locked host memory.
inline bool host_location(CUmemLocationType type) {
  return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

// One successful (`ok`) or failed allocation, `e` filled in but for its kind. A failure because memory ran
// out is an OOM event carrying the request (and, for device memory, the device's free/total memory at that
// moment, followed by a DEVICE_USAGE sample); other failures are not memory events.
void record_alloc(MemoryEvent e, bool ok, bool out_of_memory);

// Memory the driver frees with the context it was made in (cuCtxDestroy, cuDevicePrimaryCtxReset): device
// memory, arrays, managed and page-locked host memory of cuMemAlloc* / cudaMalloc* / cuMemAllocHost /
// cuMemHostAlloc. The ALLOC names that context (the current one: allocations are made in it), so that
// destroying a context made with cuCtxCreate frees its own allocations and not the primary context's of the
// same device. One driver call, for allocations that succeeded.
void record_context_alloc(MemoryEvent e, bool ok, bool out_of_memory);

// A plain allocation of device memory in the current context (cudaMalloc, cuMemAlloc and their pitched forms):
// record_context_alloc of the current device. In a dormant process an allocation that succeeded is noted in the
// live set without its device and context, which the set asks the driver for at attach (recorder.h:
// note_device_alloc_if_dormant): neither is needed before then, and asking took two driver calls an allocation.
void on_device_alloc(Api api, bool ok, bool out_of_memory, uint64_t address, uint64_t size, int result);

// The device and size of a free are those of the allocation it frees: the analyzer takes them from there,
// so a block freed while another device is current is still charged to its own.
inline void on_free(MemoryEvent e) {
  if (e.address == 0) return;  // cudaFree(nullptr) is the classic "create the context" call
  e.kind = EventKind::kFree;
  record_event(e);
}

// A free that succeeded, or that came after the driver or runtime shut down at process exit (the memory
// went with the context): both are frees. The second is recorded with its result, as a teardown free.
inline bool freed(int result) {
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
// Construct it before the real call and call done() with the call's result.
//
// Its two halves, for a caller that sees a call's start and its end apart (the injected tracer's CUPTI callback:
// API_ENTER, API_EXIT): free_before_call records `e` now unless the process is exiting, and returns true when it
// left the record to free_after_call, which records `e` with the call's `result` if that freed it.
inline bool free_before_call(const MemoryEvent& e) {
  if (recorder_exit_begun()) return true;
  on_free(e);
  return false;
}
inline void free_after_call(MemoryEvent e, int result) {
  e.result = result;
  if (freed(result)) on_free(e);
}

class FreeEvent {
 public:
  FreeEvent(const HookScope& scope, const MemoryEvent& e)
      : event_(e), deferred_(scope.outermost() && free_before_call(e)) {}
  FreeEvent(const HookScope& scope, Api api, Layer layer, uint64_t address, uint64_t stream)
      : FreeEvent(scope, {.layer = layer, .api = api, .stream = stream, .address = address}) {}
  void done(int result) {
    if (deferred_) free_after_call(event_, result);
  }

 private:
  MemoryEvent event_;
  bool deferred_;
};

// An event of the driver layer that is no allocation or free of memory (map, unmap, address reservations).
void on_other(EventKind kind, Api api, uint64_t address, uint64_t size, uint64_t handle);

// The device of a block from an explicit pool, which may belong to any device, whichever is current: the
// driver is asked whose the block is (when `ok`), else the current device.
int pool_block_device(bool ok, uint64_t address);

// A stream-ordered allocation: made while its stream is being captured, it is a memory node of the graph
// being built, not memory yet (capture_id). One driver call, only for allocations that succeeded; then the
// pool is sampled (it may have grown to hold the block). `per_thread_stream`: a _ptsz entry point.
// `e.device` kDeviceUnresolved: the device of the block's stream (async_block_device), looked up only where the
// event is recorded; in a dormant process the live set resolves it (as on_device_alloc's), and no pool is
// sampled (nothing would record it).
void record_async_alloc(MemoryEvent e, bool ok, bool out_of_memory, bool per_thread_stream);

// The free event of a stream-ordered free; one driver call for the capture check, by the outermost hook only.
MemoryEvent async_free(const HookScope& scope, Api api, uint64_t address, uint64_t stream, bool per_thread_stream);
// The same for a caller that is the outermost already (the CUPTI callback).
MemoryEvent async_free(Api api, uint64_t address, uint64_t stream, bool per_thread_stream);

// Another process's memory mapped here (IPC) at `address`: listed as imported, never this process's allocation.
void record_import(Api api, uint64_t address);

// Each device's primary context, as cuDevicePrimaryCtxRetain last returned it: a reset (cuDevicePrimaryCtxReset,
// cudaDeviceReset) names the device only, and its CONTEXT_DESTROY must name the context whose allocations go.
// primary_context: 0 when never seen (or the device is beyond the 64 the table holds).
void remember_primary_context(int device, uint64_t context);
uint64_t primary_context(int device);

// Recorded before the real call, for the reason a free is (FreeEvent): once the context is gone, another
// thread's allocation may get one of its addresses. Without a device (-1) there is nothing to attribute.
void record_context_destroy(Api api, int device, uint64_t context);

// The end of a stream capture: `graph_out` is the call's CUgraph* / cudaGraph_t* (null: nothing recorded), and
// `capture_id` was asked for before the real call (the capture is over after it); 0 = the stream was not
// capturing.
void record_graph_captured(Api api, uint64_t stream, const void* graph_out, uint64_t capture_id);

void record_instantiate(Api api, uint64_t exec, uint64_t graph);

// A graph launch; then the current device's graph memory pool is sampled (its alloc nodes may have taken memory).
void record_launch(Api api, uint64_t exec, uint64_t stream);

// A memory node of `graph`: an allocation of `size` bytes at `address` on `device` each time the graph runs.
void record_alloc_node(Api api, uint64_t graph, int device, uint64_t address, uint64_t size);
void record_free_node(Api api, uint64_t graph, uint64_t address);

}  // namespace memtrace
