// The fake CUDA runtime. Built twice: as libcudart.so.13 (exports versioned `@libcudart.so.13`, like
// the real shared runtime) and as a static library with hidden visibility (like nvcc's default static
// cudart, whose functions no preloaded library can interpose).
//
// Like the real runtime it imports no cu* symbol: on first use it dlopen()s libcuda.so.1, takes
// cuGetProcAddress_v2 with dlsym, asks that for "cuGetProcAddress" itself (at 11030 and 12000, as
// measured in /work/shared/notes/cuda-interception.md), and makes every later driver look-up through the
// 12000 (5-argument) one. A profiler that wraps the resolver therefore sees every driver call made here.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>

extern "C" {
// The per-thread-default-stream entry points the real runtime exports next to the legacy ones.
decltype(cudaMallocAsync) cudaMallocAsync_ptsz;
decltype(cudaFreeAsync) cudaFreeAsync_ptsz;
cudaError_t cudaMallocFromPoolAsync_ptsz(void** pointer, size_t size, cudaMemPool_t pool, cudaStream_t stream);
}

namespace {

using ResolverV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

// The driver entry points the runtime uses, each asked for at the version the real runtime asks.
struct Driver {
  bool loaded = false;
  decltype(&cuInit) init = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&cuCtxGetDevice) ctx_get_device = nullptr;
  decltype(&cuDeviceGetCount) device_get_count = nullptr;
  decltype(&cuMemGetInfo_v2) mem_get_info = nullptr;
  decltype(&cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&cuMemAllocPitch_v2) mem_alloc_pitch = nullptr;
  decltype(&cuMemFree_v2) mem_free = nullptr;
  decltype(&cuMemAllocManaged) mem_alloc_managed = nullptr;
  decltype(&cuMemAllocAsync) mem_alloc_async = nullptr;
  decltype(&cuMemAllocAsync) mem_alloc_async_ptsz = nullptr;
  decltype(&cuMemFreeAsync) mem_free_async = nullptr;
  decltype(&cuMemFreeAsync) mem_free_async_ptsz = nullptr;
  decltype(&cuMemAllocFromPoolAsync) mem_alloc_from_pool_async = nullptr;
  decltype(&cuMemAllocFromPoolAsync) mem_alloc_from_pool_async_ptsz = nullptr;
  decltype(&cuDeviceGetDefaultMemPool) device_get_default_mem_pool = nullptr;
};

template <typename Fn>
bool lookup(ResolverV2 resolver, const char* name, int version, cuuint64_t flags, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  if (resolver(name, &fn, version, flags, &status) != CUDA_SUCCESS || !fn) return false;
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

Driver load_driver() {
  Driver d;
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) return d;
  auto bootstrap = reinterpret_cast<ResolverV2>(dlsym(libcuda, "cuGetProcAddress_v2"));
  if (!bootstrap) return d;
  void* legacy_resolver = nullptr;  // asked for like the real runtime does; not used afterwards
  CUdriverProcAddressQueryResult status;
  bootstrap("cuGetProcAddress", &legacy_resolver, 11030, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  ResolverV2 resolver = nullptr;
  if (!lookup(bootstrap, "cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT, &resolver)) return d;
  const cuuint64_t legacy = CU_GET_PROC_ADDRESS_DEFAULT;
  const cuuint64_t ptsz = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  d.loaded = lookup(resolver, "cuInit", 2000, legacy, &d.init) &&
             lookup(resolver, "cuDevicePrimaryCtxRetain", 7000, legacy, &d.primary_ctx_retain) &&
             lookup(resolver, "cuCtxSetCurrent", 4000, legacy, &d.ctx_set_current) &&
             lookup(resolver, "cuCtxGetDevice", 2000, legacy, &d.ctx_get_device) &&
             lookup(resolver, "cuDeviceGetCount", 2000, legacy, &d.device_get_count) &&
             lookup(resolver, "cuMemGetInfo", 3020, legacy, &d.mem_get_info) &&
             lookup(resolver, "cuMemAlloc", 3020, legacy, &d.mem_alloc) &&
             lookup(resolver, "cuMemAllocPitch", 3020, legacy, &d.mem_alloc_pitch) &&
             lookup(resolver, "cuMemFree", 3020, legacy, &d.mem_free) &&
             lookup(resolver, "cuMemAllocManaged", 6000, legacy, &d.mem_alloc_managed) &&
             lookup(resolver, "cuMemAllocAsync", 11020, legacy, &d.mem_alloc_async) &&
             lookup(resolver, "cuMemAllocAsync", 11020, ptsz, &d.mem_alloc_async_ptsz) &&
             lookup(resolver, "cuMemFreeAsync", 11020, legacy, &d.mem_free_async) &&
             lookup(resolver, "cuMemFreeAsync", 11020, ptsz, &d.mem_free_async_ptsz) &&
             lookup(resolver, "cuMemAllocFromPoolAsync", 11020, legacy, &d.mem_alloc_from_pool_async) &&
             lookup(resolver, "cuMemAllocFromPoolAsync", 11020, ptsz, &d.mem_alloc_from_pool_async_ptsz) &&
             lookup(resolver, "cuDeviceGetDefaultMemPool", 11020, legacy, &d.device_get_default_mem_pool) &&
             d.init(0) == CUDA_SUCCESS;
  return d;
}

const Driver& driver() {
  static const Driver d = load_driver();
  return d;
}

cudaError_t to_runtime_error(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;  // both 4: the process is exiting
    default: return cudaErrorUnknown;
  }
}

cudaError_t bind_device(const Driver& d, int device) {
  CUcontext context = nullptr;
  CUresult result = d.primary_ctx_retain(&context, device);
  if (result == CUDA_SUCCESS) result = d.ctx_set_current(context);
  return to_runtime_error(result);
}

// The driver table, with a current context on the calling thread (device 0's primary context when the
// thread has none yet, as the real runtime does). nullptr when there is no usable driver.
const Driver* ready(cudaError_t* error) {
  const Driver& d = driver();
  if (!d.loaded) {
    *error = cudaErrorInsufficientDriver;
    return nullptr;
  }
  CUdevice current;
  if (d.ctx_get_device(&current) == CUDA_SUCCESS) return &d;
  *error = bind_device(d, 0);
  return *error == cudaSuccess ? &d : nullptr;
}

template <typename Call>
cudaError_t with_driver(Call call) {
  cudaError_t error = cudaSuccess;
  const Driver* d = ready(&error);
  return d ? call(*d) : error;
}


template <typename Fn, typename... Args>
cudaError_t allocate(void** pointer, Fn fn, Args... args) {
  if (!pointer) return cudaErrorInvalidValue;
  CUdeviceptr address = 0;
  cudaError_t error = to_runtime_error(fn(&address, args...));
  *pointer = error == cudaSuccess ? reinterpret_cast<void*>(address) : nullptr;
  return error;
}

}  // namespace

extern "C" {

cudaError_t cudaSetDevice(int device) {
  const Driver& d = driver();
  if (!d.loaded) return cudaErrorInsufficientDriver;
  return bind_device(d, device);
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return cudaErrorInvalidValue;
  return with_driver([&](const Driver& d) {
    CUdevice current = 0;
    cudaError_t error = to_runtime_error(d.ctx_get_device(&current));
    *device = current;
    return error;
  });
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return cudaErrorInvalidValue;
  return with_driver([&](const Driver& d) { return to_runtime_error(d.device_get_count(count)); });
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return with_driver([&](const Driver& d) { return to_runtime_error(d.mem_get_info(free_bytes, total_bytes)); });
}

cudaError_t cudaDeviceSynchronize() {
  return with_driver([](const Driver&) { return cudaSuccess; });  // every operation already completed
}

// cudaMalloc of 0 bytes succeeds with a null pointer (as documented for the real runtime).
cudaError_t cudaMalloc(void** pointer, size_t size) {
  if (pointer && size == 0) {
    *pointer = nullptr;
    return cudaSuccess;
  }
  return with_driver([&](const Driver& d) { return allocate(pointer, d.mem_alloc, size); });
}

cudaError_t cudaMallocPitch(void** pointer, size_t* pitch, size_t width, size_t height) {
  return with_driver([&](const Driver& d) {
    return allocate(pointer, d.mem_alloc_pitch, pitch, width, height, 4u);
  });
}

cudaError_t cudaMallocManaged(void** pointer, size_t size, unsigned int flags) {
  return with_driver([&](const Driver& d) { return allocate(pointer, d.mem_alloc_managed, size, flags); });
}

cudaError_t cudaFree(void* pointer) {
  return with_driver([&](const Driver& d) {
    return to_runtime_error(d.mem_free(reinterpret_cast<CUdeviceptr>(pointer)));
  });
}

cudaError_t cudaMallocAsync(void** pointer, size_t size, cudaStream_t stream) {
  return with_driver([&](const Driver& d) { return allocate(pointer, d.mem_alloc_async, size, stream); });
}

cudaError_t cudaMallocAsync_ptsz(void** pointer, size_t size, cudaStream_t stream) {
  return with_driver([&](const Driver& d) { return allocate(pointer, d.mem_alloc_async_ptsz, size, stream); });
}

cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  return with_driver([&](const Driver& d) {
    return to_runtime_error(d.mem_free_async(reinterpret_cast<CUdeviceptr>(pointer), stream));
  });
}

cudaError_t cudaFreeAsync_ptsz(void* pointer, cudaStream_t stream) {
  return with_driver([&](const Driver& d) {
    return to_runtime_error(d.mem_free_async_ptsz(reinterpret_cast<CUdeviceptr>(pointer), stream));
  });
}

cudaError_t cudaMallocFromPoolAsync(void** pointer, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  return with_driver([&](const Driver& d) {
    return allocate(pointer, d.mem_alloc_from_pool_async, size, pool, stream);
  });
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** pointer, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  return with_driver([&](const Driver& d) {
    return allocate(pointer, d.mem_alloc_from_pool_async_ptsz, size, pool, stream);
  });
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  return with_driver([&](const Driver& d) {
    return to_runtime_error(d.device_get_default_mem_pool(pool, device));
  });
}

}  // extern "C"
