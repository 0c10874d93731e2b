#include "samplers/pool_sampler.h"

#include <pthread.h>
#include <sched.h>

#include "hooks/resolver.h"
#include "record/recorder.h"
#include "samplers/device_usage.h"
#include "samplers/pool_sample_table.h"

namespace memtrace {

std::atomic<int> g_pools_seen{0};

namespace {

// CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT of `pool` (cuda.h: "Amount of backing memory currently allocated for
// the mempool", a cuuint64_t). False when the driver cannot say (a destroyed pool, no driver).
bool pool_reserved_bytes(uint64_t pool, uint64_t* bytes) {
  using Fn = CUresult (*)(CUmemoryPool, CUmemPool_attribute, void*);
  auto fn = reinterpret_cast<Fn>(driver_helper(kMemPoolGetAttribute));
  cuuint64_t value = 0;
  if (!fn || fn(reinterpret_cast<CUmemoryPool>(pool), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value) != CUDA_SUCCESS)
    return false;
  *bytes = value;
  return true;
}

// CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT of `device` ("memory currently allocated for use by the CUDA graphs
// asynchronous allocator", a cuuint64_t).
bool graph_pool_reserved_bytes(int device, uint64_t* bytes) {
  using Fn = CUresult (*)(CUdevice, CUgraphMem_attribute, void*);
  auto fn = reinterpret_cast<Fn>(driver_helper(kDeviceGetGraphMemAttribute));
  cuuint64_t value = 0;
  if (!fn || fn(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value) != CUDA_SUCCESS) return false;
  *bytes = value;
  return true;
}

uint64_t current_pool_of(int device) {
  using Fn = CUresult (*)(CUmemoryPool*, CUdevice);
  auto fn = reinterpret_cast<Fn>(driver_helper(kDeviceGetMemPool));
  CUmemoryPool pool = nullptr;
  if (!fn || fn(&pool, device) != CUDA_SUCCESS) return 0;
  return reinterpret_cast<uintptr_t>(pool);
}

// The table's lock: held for a compare and, when the sample changed, the event's append, so that the
// trace's samples of a pool come in the order the table saw them. Never held while calling CUDA.
std::atomic<bool> g_table_lock{false};
PoolSampleTable g_table;

void lock_table() {
  for (int spins = 0; g_table_lock.exchange(true, std::memory_order_acquire); spins++)
    if (spins > 64) sched_yield();
}
void unlock_table() { g_table_lock.store(false, std::memory_order_release); }

void write_sample(uint64_t pool, int device, uint64_t bytes, Api api) {
  record_event({.kind = EventKind::kPoolReserved, .api = api, .device = device, .address = pool, .size = bytes});
}

// Records `bytes` for (pool, device) and writes the event if it changed. `add` false: only for a pool the
// table has (see PoolSampleTable::update).
void offer(uint64_t pool, int device, uint64_t bytes, Api api, bool add = true) {
  // Recording an event on a device seen for the first time reads its PCI bus id (a driver call): done here,
  // before the lock, which is never held while calling CUDA.
  device_usage_note_device(device);
  lock_table();
  if (g_table.update(pool, device, bytes, add)) {
    g_pools_seen.store(1, std::memory_order_relaxed);
    write_sample(pool, device, bytes, api);
  }
  unlock_table();
}

int known_device(uint64_t pool) {
  lock_table();
  int device = g_table.device_of(pool);
  unlock_table();
  return device;
}

// A forked child starts a trace of its own: its first sample of each pool must be written again, and a lock
// held by a parent thread that does not exist in the child must not stay held.
void reset_in_child() {
  g_table = PoolSampleTable{};
  g_table_lock.store(false);
}
__attribute__((constructor)) void register_fork_handler() { pthread_atfork(nullptr, nullptr, reset_in_child); }

}  // namespace

void sample_pool(uint64_t pool, int device, Api api) {
  if (pool == 0) return;
  if (device < 0) device = known_device(pool);
  if (device < 0) device = current_device();
  uint64_t bytes = 0;
  if (pool_reserved_bytes(pool, &bytes)) offer(pool, device, bytes, api);
}

void sample_device_pool(int device, Api api) {
  if (device < 0) return;
  sample_pool(current_pool_of(device), device, api);
}

void sample_pool_after_alloc(Api api, int device, uint64_t address) {
  if (api == Api::kCudaMallocAsync || api == Api::kCuMemAllocAsync) {
    sample_device_pool(device, api);
    return;
  }
  using Fn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  auto fn = reinterpret_cast<Fn>(driver_helper(kPointerGetAttribute));
  CUmemoryPool pool = nullptr;
  if (fn && fn(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, address) == CUDA_SUCCESS)
    sample_pool(reinterpret_cast<uintptr_t>(pool), device, api);
}

void pool_created(uint64_t pool, int device, Api api) { sample_pool(pool, device, api); }

void pool_destroyed(uint64_t pool, Api api) {
  if (pool == 0) return;
  lock_table();
  int device = g_table.device_of(pool);
  // The driver releases a destroyed pool's memory (at once, or once its last block is freed). A pool never
  // sampled has nothing to take back.
  if (device != -1 && g_table.update(pool, device, 0)) write_sample(pool, device, 0, api);
  g_table.remove(pool);
  unlock_table();
}

void sample_known_pools(Api api) {
  if (!pools_seen()) return;
  uint64_t pools[PoolSampleTable::kSlots];
  int devices[PoolSampleTable::kSlots];
  lock_table();
  int n = g_table.pools(pools, devices, PoolSampleTable::kSlots);
  unlock_table();
  for (int i = 0; i < n; i++) {
    uint64_t bytes = 0;
    if (pool_reserved_bytes(pools[i], &bytes)) offer(pools[i], devices[i], bytes, api, /*add=*/false);
  }
}

void sample_graph_pool(int device, Api api) {
  if (device < 0) return;
  uint64_t bytes = 0;
  if (!graph_pool_reserved_bytes(device, &bytes)) return;
  // A device's graph pool holds nothing before the first graph with memory nodes runs: no first sample of 0
  // (every launch of a graph without memory nodes would otherwise write one per device).
  lock_table();
  bool unseen_empty = bytes == 0 && !g_table.contains(0, device);
  unlock_table();
  if (!unseen_empty) offer(0, device, bytes, api);
}

}  // namespace memtrace
