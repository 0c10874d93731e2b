// Pools, synchronizations, events, the graph memory pool and PCI bus ids of the fake driver (see
// driver_pools.h for the reserved-memory model).
#include "driver_pools.h"

#include <pthread.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "cupti_callbacks.h"
#include "device_memory.h"
#include "driver_internal.h"

namespace fakecuda {
namespace {

constexpr int kMaxDevices = 64;

struct PoolState {
  uint64_t reserved_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t release_threshold_bytes = 0;
  bool created = false;  // by cuMemPoolCreate (the default pools are driver_context.cc's static objects)
};

struct Block {
  CUmemoryPool pool;
  uint64_t size;
};

struct GraphMemory {
  uint64_t reserved_bytes = 0;
  uint64_t used_bytes = 0;
};

struct State {
  std::mutex lock;
  std::map<CUmemoryPool, PoolState> pools;  // every pool a block or an attribute has touched
  std::map<uintptr_t, Block> blocks;
  CUmemoryPool current[kMaxDevices] = {};
  GraphMemory graph[kMaxDevices];
};

State& state();
void lock_before_fork() { state().lock.lock(); }
void unlock_after_fork() { state().lock.unlock(); }
State& state() {
  static State* s = [] {
    State* created = new State();  // never destroyed: atexit handlers of traced programs may still free
    pthread_atfork(lock_before_fork, unlock_after_fork, unlock_after_fork);
    return created;
  }();
  return *s;
}

uint64_t round_up(uint64_t bytes) {
  return (bytes + kPoolGranularityBytes - 1) / kPoolGranularityBytes * kPoolGranularityBytes;
}

// Releases what `pool` holds above max(used, keep), both rounded up to the granularity.
void shrink(PoolState& pool, uint64_t keep_bytes) {
  uint64_t keep = round_up(pool.used_bytes > keep_bytes ? pool.used_bytes : keep_bytes);
  if (pool.reserved_bytes > keep) pool.reserved_bytes = keep;
}

// A synchronization: every pool releases what it holds above its release threshold.
CUresult synchronize() {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  for (auto& [handle, pool] : s.pools) shrink(pool, pool.release_threshold_bytes);
  return CUDA_SUCCESS;
}

bool created_pool(State& s, CUmemoryPool pool) {
  auto it = s.pools.find(pool);
  return it != s.pools.end() && it->second.created;
}

}  // namespace

CUmemoryPool current_pool(int device) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  return s.current[device] ? s.current[device] : default_pool(device);
}

void pool_block_allocated(CUmemoryPool pool, uintptr_t address, uint64_t size) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  PoolState& p = s.pools[pool];
  p.used_bytes += size;
  if (p.used_bytes > p.reserved_bytes) p.reserved_bytes = round_up(p.used_bytes);
  s.blocks[address] = Block{pool, size};
}

void pool_block_freed(uintptr_t address) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.blocks.find(address);
  if (it == s.blocks.end()) return;
  s.pools[it->second.pool].used_bytes -= it->second.size;
  s.blocks.erase(it);
}

CUmemoryPool pool_of_block(uintptr_t address) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.blocks.find(address);
  return it == s.blocks.end() ? nullptr : it->second.pool;
}

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

// The per-thread-default-stream entry point the real driver exports next to the legacy one.
CUresult cuStreamSynchronize_ptsz(CUstream stream);

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = current_pool(device);
  return CUDA_SUCCESS;
}

CUresult cuDeviceSetMemPool(CUdevice device, CUmemoryPool pool) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!pool || pool->device != device) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  s.current[device] = pool;
  return CUDA_SUCCESS;
}

// Pools of device memory only (a host-located pool is refused: the double has no host pools).
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !device_valid(props->location.id))
    return CUDA_ERROR_INVALID_VALUE;
  auto* created = new CUmemPoolHandle_st{props->location.id};
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  s.pools[created].created = true;
  *pool = created;
  return CUDA_SUCCESS;
}

// Like the real driver, a pool destroyed with blocks outstanding lives on until they are freed; the double
// simply forgets its state (its blocks stay charged to the device until freed).
CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  if (!pool || !created_pool(s, pool)) return CUDA_ERROR_INVALID_VALUE;
  for (CUmemoryPool& current : s.current)
    if (current == pool) current = nullptr;
  s.pools.erase(pool);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t min_bytes_to_keep) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  shrink(s.pools[pool], min_bytes_to_keep);
  return CUDA_SUCCESS;
}

// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (set and get), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT and
// CU_MEMPOOL_ATTR_USED_MEM_CURRENT (get): cuuint64_t values. Anything else: CUDA_ERROR_INVALID_VALUE.
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pool || !value || attribute != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  s.pools[pool].release_threshold_bytes = *static_cast<cuuint64_t*>(value);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  const PoolState& p = s.pools[pool];
  cuuint64_t* out = static_cast<cuuint64_t*>(value);
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = p.release_threshold_bytes; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = p.reserved_bytes; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = p.used_bytes; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

// Every operation of the double completes at once, so synchronizing only gives the pools their release.
// A CUPTI subscriber sees each between its API_ENTER and API_EXIT (cupti_callbacks.h).
CUresult cuStreamSynchronize(CUstream stream) {
  cuStreamSynchronize_params params{stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize", &params,
                      [] { return synchronize(); });
}
CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  cuStreamSynchronize_ptsz_params params{stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, "cuStreamSynchronize_ptsz", &params,
                      [] { return synchronize(); });
}
CUresult cuCtxSynchronize() {
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize", nullptr,
                      [] { return synchronize(); });
}
CUresult cuCtxSynchronize_v2(CUcontext context) {
  cuCtxSynchronize_v2_params params{context};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, "cuCtxSynchronize_v2", &params,
                      [] { return synchronize(); });
}
CUresult cuEventSynchronize(CUevent event) {
  cuEventSynchronize_params params{event};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, "cuEventSynchronize", &params,
                      [&] { return event ? synchronize() : CUDA_ERROR_INVALID_HANDLE; });
}

// Events are opaque handles to the double: nothing is ever recorded in them.
CUresult cuEventCreate(CUevent* event, unsigned int) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!event) return CUDA_ERROR_INVALID_VALUE;
  *event = reinterpret_cast<CUevent>(new char);
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent event) {
  if (!event) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<char*>(event);
  return CUDA_SUCCESS;
}

// CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT / USED_MEM_CURRENT (cuuint64_t) of the device's graph memory pool.
CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attribute, void* value) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  cuuint64_t* out = static_cast<cuuint64_t*>(value);
  switch (attribute) {
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *out = s.graph[device].reserved_bytes; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *out = s.graph[device].used_bytes; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDeviceGraphMemTrim(CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  s.graph[device].reserved_bytes = s.graph[device].used_bytes;
  return CUDA_SUCCESS;
}

// "0000:BB:00.0" with bus BB = 0xc0 - 2 * ordinal: the bus order is the reverse of the ordinals, as it can
// be on a real machine (CUDA numbers devices fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID), so a
// tracer that matched NVML devices by index instead of bus id would get another device's figures.
CUresult cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!bus_id || length < 13) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02x:00.0", 0xc0 - 2 * device);
  return CUDA_SUCCESS;
}

// The UUID of device `ordinal`: the 12 bytes "fakecudauuid" and the ordinal as a big-endian u32, so that each
// device's is distinct and tests/e2e can spell it (check_job_identity.py).
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(uuid->bytes, "fakecudauuid", 12);
  for (int i = 0; i < 4; i++) uuid->bytes[12 + i] = static_cast<char>(static_cast<uint32_t>(device) >> (24 - 8 * i));
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) { return cuDeviceGetUuid_v2(uuid, device); }

// "fakecuda device N".
CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!name || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(length), "fakecuda device %d", device);
  return CUDA_SUCCESS;
}

// The capacity every fake device has (device_memory.h).
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = static_cast<size_t>(device_total_bytes());
  return CUDA_SUCCESS;
}

// Test-only: sets the graph memory pool of `device` (the double runs no graph that would fill it).
void fakecuda_set_graph_memory(int device, uint64_t reserved_bytes, uint64_t used_bytes) {
  if (!device_valid(device)) return;
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  s.graph[device] = GraphMemory{reserved_bytes, used_bytes};
}

// Test-only, for the fake NVML: bytes of `device` charged to live allocations of this process, each
// device's capacity, and the number of devices (none of which needs cuInit, as NVML does not).
uint64_t fakecuda_device_used_bytes(int device) {
  return device_valid(device) ? device_total_bytes() - device_free_bytes(device) : 0;
}
uint64_t fakecuda_device_total_bytes() { return device_total_bytes(); }
int fakecuda_device_count() { return device_count(); }

}  // extern "C"
