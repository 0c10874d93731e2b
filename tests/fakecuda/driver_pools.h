// The fake driver's stream-ordered memory pools: how much backing memory each pool holds
// (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), so that a tracer sampling pools sees it change the way the real
// driver's does, with round numbers a test can work out by hand:
//   - an allocation that needs more than the pool holds grows it to the pool's used bytes rounded up to
//     kPoolGranularityBytes (2 MiB);
//   - a free returns the block to the pool: used bytes drop, reserved bytes stay;
//   - a synchronization (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize) shrinks every pool that
//     holds more than its CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (default 0) to the larger of its used bytes and
//     its threshold, each rounded up to 2 MiB;
//   - cuMemPoolTrimTo(pool, keep) shrinks it to the larger of its used bytes and `keep`, rounded up the same.
// Device accounting (cuMemGetInfo) is unchanged by this: pool blocks are charged one by one, as before.
//
// The graph memory pool of each device (cuDeviceGetGraphMemAttribute) holds what the test-only
// fakecuda_set_graph_memory(device, reserved, used) sets (the double runs no graph); cuDeviceGraphMemTrim
// shrinks its reserved bytes to its used bytes.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace fakecuda {

constexpr uint64_t kPoolGranularityBytes = 2ull << 20;

// The pool cuMemAllocAsync uses on `device` (cuDeviceSetMemPool; the default pool until set).
CUmemoryPool current_pool(int device);
// A block of `size` bytes at `address` was allocated from / returned to its pool.
void pool_block_allocated(CUmemoryPool pool, uintptr_t address, uint64_t size);
void pool_block_freed(uintptr_t address);
// The pool a live block came from; null when `address` is not the start of a live pool block.
CUmemoryPool pool_of_block(uintptr_t address);

}  // namespace fakecuda
