// The fake runtime's pools, synchronizations, events and graph memory functions: each forwards to the
// driver function the real runtime calls, looked up through cuGetProcAddress like everything in runtime.cc
// (so that a tracer's resolver wrapper sees the driver calls nested in these).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

namespace {

using ResolverV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

struct PoolDriver {
  bool loaded = false;
  decltype(&cuInit) init = nullptr;
  decltype(&cuMemPoolCreate) pool_create = nullptr;
  decltype(&cuMemPoolDestroy) pool_destroy = nullptr;
  decltype(&cuMemPoolTrimTo) pool_trim_to = nullptr;
  decltype(&cuMemPoolSetAttribute) pool_set_attribute = nullptr;
  decltype(&cuMemPoolGetAttribute) pool_get_attribute = nullptr;
  decltype(&cuDeviceGetMemPool) device_get_mem_pool = nullptr;
  decltype(&cuDeviceSetMemPool) device_set_mem_pool = nullptr;
  decltype(&cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&cuEventCreate) event_create = nullptr;
  decltype(&cuEventDestroy_v2) event_destroy = nullptr;
  decltype(&cuEventSynchronize) event_synchronize = nullptr;
  decltype(&cuDeviceGraphMemTrim) device_graph_mem_trim = nullptr;
  decltype(&cuDeviceGetGraphMemAttribute) device_get_graph_mem_attribute = nullptr;
};

template <typename Fn>
bool lookup(ResolverV2 resolver, const char* name, int version, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  if (resolver(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !fn) return false;
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

PoolDriver load() {
  PoolDriver d;
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) return d;
  auto bootstrap = reinterpret_cast<ResolverV2>(dlsym(libcuda, "cuGetProcAddress_v2"));
  ResolverV2 resolver = nullptr;
  if (!bootstrap || !lookup(bootstrap, "cuGetProcAddress", 12000, &resolver)) return d;
  d.loaded = lookup(resolver, "cuInit", 2000, &d.init) && lookup(resolver, "cuMemPoolCreate", 11020, &d.pool_create) &&
             lookup(resolver, "cuMemPoolDestroy", 11020, &d.pool_destroy) &&
             lookup(resolver, "cuMemPoolTrimTo", 11020, &d.pool_trim_to) &&
             lookup(resolver, "cuMemPoolSetAttribute", 11020, &d.pool_set_attribute) &&
             lookup(resolver, "cuMemPoolGetAttribute", 11020, &d.pool_get_attribute) &&
             lookup(resolver, "cuDeviceGetMemPool", 11020, &d.device_get_mem_pool) &&
             lookup(resolver, "cuDeviceSetMemPool", 11020, &d.device_set_mem_pool) &&
             lookup(resolver, "cuStreamSynchronize", 2000, &d.stream_synchronize) &&
             lookup(resolver, "cuEventCreate", 2000, &d.event_create) &&
             lookup(resolver, "cuEventDestroy", 4000, &d.event_destroy) &&
             lookup(resolver, "cuEventSynchronize", 2000, &d.event_synchronize) &&
             lookup(resolver, "cuDeviceGraphMemTrim", 11040, &d.device_graph_mem_trim) &&
             lookup(resolver, "cuDeviceGetGraphMemAttribute", 11040, &d.device_get_graph_mem_attribute) &&
             d.init(0) == CUDA_SUCCESS;
  return d;
}

const PoolDriver& driver() {
  static const PoolDriver d = load();
  return d;
}

cudaError_t runtime_error(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    default: return cudaErrorUnknown;
  }
}

// Calls `call(driver)` and converts its result; cudaErrorInsufficientDriver without a usable driver.
template <typename Call>
cudaError_t forward(Call call) {
  const PoolDriver& d = driver();
  return d.loaded ? runtime_error(call(d)) : cudaErrorInsufficientDriver;
}

// cudaMemPoolProps and CUmemPoolProps have the same layout (the runtime passes them through).
static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps), "pool properties layout");

}  // namespace

extern "C" {

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  return forward([&](const PoolDriver& d) {
    return d.pool_create(reinterpret_cast<CUmemoryPool*>(pool), reinterpret_cast<const CUmemPoolProps*>(props));
  });
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  return forward([&](const PoolDriver& d) { return d.pool_destroy(reinterpret_cast<CUmemoryPool>(pool)); });
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t min_bytes_to_keep) {
  return forward(
      [&](const PoolDriver& d) { return d.pool_trim_to(reinterpret_cast<CUmemoryPool>(pool), min_bytes_to_keep); });
}

// cudaMemPoolAttr and CUmemPool_attribute have the same values.
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  return forward([&](const PoolDriver& d) {
    return d.pool_set_attribute(reinterpret_cast<CUmemoryPool>(pool), static_cast<CUmemPool_attribute>(attribute),
                                value);
  });
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  return forward([&](const PoolDriver& d) {
    return d.pool_get_attribute(reinterpret_cast<CUmemoryPool>(pool), static_cast<CUmemPool_attribute>(attribute),
                                value);
  });
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  return forward(
      [&](const PoolDriver& d) { return d.device_get_mem_pool(reinterpret_cast<CUmemoryPool*>(pool), device); });
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  return forward(
      [&](const PoolDriver& d) { return d.device_set_mem_pool(device, reinterpret_cast<CUmemoryPool>(pool)); });
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return forward([&](const PoolDriver& d) { return d.stream_synchronize(reinterpret_cast<CUstream>(stream)); });
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return forward([&](const PoolDriver& d) { return d.event_create(reinterpret_cast<CUevent*>(event), 0); });
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return forward([&](const PoolDriver& d) { return d.event_destroy(reinterpret_cast<CUevent>(event)); });
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return forward([&](const PoolDriver& d) { return d.event_synchronize(reinterpret_cast<CUevent>(event)); });
}

cudaError_t cudaDeviceGraphMemTrim(int device) {
  return forward([&](const PoolDriver& d) { return d.device_graph_mem_trim(device); });
}

cudaError_t cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType attribute, void* value) {
  return forward([&](const PoolDriver& d) {
    return d.device_get_graph_mem_attribute(device, static_cast<CUgraphMem_attribute>(attribute), value);
  });
}

}  // extern "C"
