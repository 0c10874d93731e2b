// Samples of the reserved memory of stream-ordered memory pools (POOL_RESERVED events, see memtrace.proto).
//
// A pool's reserved memory changes where no allocation is visible: it grows when an allocation needs more
// backing memory than the pool holds, and it shrinks at a synchronization (cuStreamSynchronize,
// cuCtxSynchronize, cuEventSynchronize: where the driver releases what a pool holds above its
// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), at a trim (cuMemPoolTrimTo) and when the pool is destroyed. The
// tracer reads CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT at those moments and writes an event only when the
// value differs from that pool's previous sample, so a training loop that synchronizes every step writes
// nothing while its pools keep their size.
//
// The graph memory pool of a device (CUDA graphs' memory nodes) is sampled the same way, as pool 0, with
// cuDeviceGetGraphMemAttribute(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), at graph launches and
// cuDeviceGraphMemTrim; it holds nothing until a graph with memory nodes first runs, so its first sample is
// written only when it is not 0.
//
// Measured on an H200 (driver 580, CUDA 13.0): the samples equal what the program itself reads with
// cudaMemPoolGetAttribute at each step (32 MiB after a 3 MiB block, 96 MiB after 64 MiB more, 0 after a
// synchronization with release threshold 0, 128 MiB kept across cudaDeviceSynchronize with threshold 128 MiB,
// 0 after cudaMemPoolTrimTo(pool, 0); a captured 32 MiB allocation's graph pool: 32 MiB after the launch,
// 0 after cudaDeviceGraphMemTrim), through the shared and the static runtime.
//
// Every function here is called from a hook, after the real call returned, and calls only the driver's
// own functions (never a public entry point that could be one of our hooks).
#pragma once
#include <atomic>
#include <cstdint>

#include "record/schema.h"

namespace memtrace {

// After a successful stream-ordered allocation of the block at `address` on `device` by `api`: samples the
// pool it came from. cudaMallocAsync / cuMemAllocAsync: the device's current pool (cuDeviceGetMemPool);
// from an explicit pool: the block's pool (cuPointerGetAttribute, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE).
void sample_pool_after_alloc(Api api, int device, uint64_t address);

// After a successful stream-ordered allocation from the current pool of `device` (cudaMallocAsync,
// cuMemAllocAsync): that pool is cuDeviceGetMemPool(device), which cudaDeviceSetMemPool may have changed.
void sample_device_pool(int device, Api api);

// After a successful allocation from an explicit pool (cudaMallocFromPoolAsync, cuMemAllocFromPoolAsync),
// or a trim of it. `device` is where its blocks live (-1: the pool's device as first recorded, else the
// current device).
void sample_pool(uint64_t pool, int device, Api api);

// cuMemPoolCreate / cudaMemPoolCreate returned `pool` for `device` (the location in its properties): its
// first sample (normally 0 bytes). Destroy: a last sample of 0 bytes, since the driver releases the pool's
// memory with it, and the pool's slot is freed for another.
void pool_created(uint64_t pool, int device, Api api);
void pool_destroyed(uint64_t pool, Api api);

// At a synchronization: samples every pool seen so far. Costs one relaxed atomic load when there is none.
void sample_known_pools(Api api);

// The graph memory pool of `device`, sampled as pool 0 (at cuGraphLaunch / cudaGraphLaunch, on the
// device the graph runs on: hooks/hook_events.cc's record_launch, and at cuDeviceGraphMemTrim).
void sample_graph_pool(int device, Api api);

// True once any pool has been seen: the synchronization hooks do nothing more than forward until then.
extern std::atomic<int> g_pools_seen;
inline bool pools_seen() { return g_pools_seen.load(std::memory_order_relaxed) != 0; }

}  // namespace memtrace
