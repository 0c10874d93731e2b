// The fake CUDA runtime. Built twice: as libcudart.so.13 (exports versioned `@libcudart.so.13`, like
// the real shared runtime) and as a static library with hidden visibility (like nvcc's default static
// cudart, whose functions no preloaded library can interpose).
//
// Like the real runtime it imports no cu* symbol: on first use it dlopen()s libcuda.so.1, takes
// cuGetProcAddress_v2 with dlsym, asks that for "cuGetProcAddress" itself (at 11030 and 12000, as
// measured, see docs/cuda-interception.md), and makes every later driver look-up through the
// 12000 (5-argument) one. A profiler that wraps the resolver therefore sees every driver call made here.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>

extern "C" {
// The per-thread-default-stream entry points the real runtime exports next to the legacy ones.
decltype(cudaMallocAsync) cudaMallocAsync_ptsz;
decltype(cudaFreeAsync) cudaFreeAsync_ptsz;
cudaError_t cudaMallocFromPoolAsync_ptsz(void** pointer, size_t size, cudaMemPool_t pool, cudaStream_t stream);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream);
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
  // "cuCtxGetDevice" at 13000 is the two-argument cuCtxGetDevice_v2; asked for before the one-argument
  // form, as a CUDA 13 runtime may: a profiler that remembers the first answer as the one-argument
  // function would call it with a missing argument.
  decltype(&cuCtxGetDevice_v2) ctx_get_device_of = nullptr;
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
  // Host memory, arrays, imports, teardown, graphs (the runtime entry points further down).
  decltype(&cuMemAllocHost_v2) mem_alloc_host = nullptr;
  decltype(&cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&cuMemFreeHost) mem_free_host = nullptr;
  decltype(&cuMemHostRegister_v2) mem_host_register = nullptr;
  decltype(&cuMemHostUnregister) mem_host_unregister = nullptr;
  decltype(&cuArrayCreate_v2) array_create = nullptr;
  decltype(&cuArray3DCreate_v2) array_3d_create = nullptr;
  decltype(&cuArrayDestroy) array_destroy = nullptr;
  decltype(&cuMipmappedArrayCreate) mipmapped_array_create = nullptr;
  decltype(&cuMipmappedArrayDestroy) mipmapped_array_destroy = nullptr;
  decltype(&cuIpcOpenMemHandle_v2) ipc_open_mem_handle = nullptr;
  decltype(&cuIpcCloseMemHandle) ipc_close_mem_handle = nullptr;
  // "cuDevicePrimaryCtxReset" at 7000, as the CUDA 13 runtime asks (measured on the H200): CUDA 7.0's ABI.
  decltype(&cuDevicePrimaryCtxReset_v2) device_primary_ctx_reset = nullptr;
  decltype(&cuStreamCreate) stream_create = nullptr;
  decltype(&cuStreamDestroy_v2) stream_destroy = nullptr;
  decltype(&cuStreamBeginCapture_v2) stream_begin_capture = nullptr;
  decltype(&cuStreamBeginCapture_v2) stream_begin_capture_ptsz = nullptr;
  decltype(&cuStreamEndCapture) stream_end_capture = nullptr;
  decltype(&cuStreamEndCapture) stream_end_capture_ptsz = nullptr;
  decltype(&cuGraphCreate) graph_create = nullptr;
  decltype(&cuGraphAddMemAllocNode) graph_add_mem_alloc_node = nullptr;
  decltype(&cuGraphAddMemFreeNode) graph_add_mem_free_node = nullptr;
  decltype(&cuGraphInstantiateWithFlags) graph_instantiate = nullptr;  // "cuGraphInstantiate" at 12000
  decltype(&cuGraphInstantiateWithFlags) graph_instantiate_with_flags = nullptr;
  decltype(&cuGraphLaunch) graph_launch = nullptr;
  decltype(&cuGraphLaunch) graph_launch_ptsz = nullptr;
};

template <typename Fn>
bool lookup(ResolverV2 resolver, const char* name, int version, cuuint64_t flags, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  if (resolver(name, &fn, version, flags, &status) != CUDA_SUCCESS || !fn) return false;
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

bool lookup_more(ResolverV2 resolver, Driver* d) {
  const cuuint64_t legacy = CU_GET_PROC_ADDRESS_DEFAULT;
  const cuuint64_t ptsz = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  return lookup(resolver, "cuMemAllocHost", 3020, legacy, &d->mem_alloc_host) &&
         lookup(resolver, "cuMemHostAlloc", 2020, legacy, &d->mem_host_alloc) &&
         lookup(resolver, "cuMemFreeHost", 2000, legacy, &d->mem_free_host) &&
         lookup(resolver, "cuMemHostRegister", 6050, legacy, &d->mem_host_register) &&
         lookup(resolver, "cuMemHostUnregister", 4000, legacy, &d->mem_host_unregister) &&
         lookup(resolver, "cuArrayCreate", 3020, legacy, &d->array_create) &&
         lookup(resolver, "cuArray3DCreate", 3020, legacy, &d->array_3d_create) &&
         lookup(resolver, "cuArrayDestroy", 2000, legacy, &d->array_destroy) &&
         lookup(resolver, "cuMipmappedArrayCreate", 5000, legacy, &d->mipmapped_array_create) &&
         lookup(resolver, "cuMipmappedArrayDestroy", 5000, legacy, &d->mipmapped_array_destroy) &&
         lookup(resolver, "cuIpcOpenMemHandle", 11000, legacy, &d->ipc_open_mem_handle) &&
         lookup(resolver, "cuIpcCloseMemHandle", 4010, legacy, &d->ipc_close_mem_handle) &&
         lookup(resolver, "cuDevicePrimaryCtxReset", 7000, legacy, &d->device_primary_ctx_reset) &&
         lookup(resolver, "cuStreamCreate", 2000, legacy, &d->stream_create) &&
         lookup(resolver, "cuStreamDestroy", 4000, legacy, &d->stream_destroy) &&
         lookup(resolver, "cuStreamBeginCapture", 10010, legacy, &d->stream_begin_capture) &&
         lookup(resolver, "cuStreamBeginCapture", 10010, ptsz, &d->stream_begin_capture_ptsz) &&
         lookup(resolver, "cuStreamEndCapture", 10000, legacy, &d->stream_end_capture) &&
         lookup(resolver, "cuStreamEndCapture", 10000, ptsz, &d->stream_end_capture_ptsz) &&
         lookup(resolver, "cuGraphCreate", 10000, legacy, &d->graph_create) &&
         lookup(resolver, "cuGraphAddMemAllocNode", 11040, legacy, &d->graph_add_mem_alloc_node) &&
         lookup(resolver, "cuGraphAddMemFreeNode", 11040, legacy, &d->graph_add_mem_free_node) &&
         lookup(resolver, "cuGraphInstantiate", 12000, legacy, &d->graph_instantiate) &&
         lookup(resolver, "cuGraphInstantiateWithFlags", 11040, legacy, &d->graph_instantiate_with_flags) &&
         lookup(resolver, "cuGraphLaunch", 10000, legacy, &d->graph_launch) &&
         lookup(resolver, "cuGraphLaunch", 10000, ptsz, &d->graph_launch_ptsz);
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
  d.loaded = lookup(resolver, "cuCtxGetDevice", 13000, legacy, &d.ctx_get_device_of) &&
             lookup(resolver, "cuInit", 2000, legacy, &d.init) &&
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
             lookup_more(resolver, &d) && d.init(0) == CUDA_SUCCESS;
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
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;  // both 4: the process is exiting
    case CUDA_ERROR_ILLEGAL_STATE: return cudaErrorIllegalState;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return cudaErrorHostMemoryNotRegistered;
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
  return with_driver([&](const Driver& d) { return allocate(pointer, d.mem_alloc_pitch, pitch, width, height, 4u); });
}

cudaError_t cudaMallocManaged(void** pointer, size_t size, unsigned int flags) {
  return with_driver([&](const Driver& d) { return allocate(pointer, d.mem_alloc_managed, size, flags); });
}

cudaError_t cudaFree(void* pointer) {
  return with_driver(
      [&](const Driver& d) { return to_runtime_error(d.mem_free(reinterpret_cast<CUdeviceptr>(pointer))); });
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
  return with_driver(
      [&](const Driver& d) { return allocate(pointer, d.mem_alloc_from_pool_async, size, pool, stream); });
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** pointer, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  return with_driver(
      [&](const Driver& d) { return allocate(pointer, d.mem_alloc_from_pool_async_ptsz, size, pool, stream); });
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  return with_driver([&](const Driver& d) { return to_runtime_error(d.device_get_default_mem_pool(pool, device)); });
}

// ---- host memory, arrays, imports, teardown, graphs ----------------------------------------------------

}  // extern "C"

namespace {

template <typename Fn, typename... Args>
cudaError_t call_driver(Fn Driver::*fn, Args... args) {
  return with_driver([&](const Driver& d) { return to_runtime_error((d.*fn)(args...)); });
}

// The driver format of a runtime channel description: every non-zero channel has x's bit width.
bool array_format(const cudaChannelFormatDesc* desc, CUarray_format* format, unsigned* channels) {
  if (!desc) return false;
  *channels = (desc->x != 0) + (desc->y != 0) + (desc->z != 0) + (desc->w != 0);
  switch (desc->f) {
    case cudaChannelFormatKindUnsigned:
      *format = desc->x == 8    ? CU_AD_FORMAT_UNSIGNED_INT8
                : desc->x == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
                                : CU_AD_FORMAT_UNSIGNED_INT32;
      break;
    case cudaChannelFormatKindSigned:
      *format = desc->x == 8    ? CU_AD_FORMAT_SIGNED_INT8
                : desc->x == 16 ? CU_AD_FORMAT_SIGNED_INT16
                                : CU_AD_FORMAT_SIGNED_INT32;
      break;
    case cudaChannelFormatKindFloat: *format = desc->x == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT; break;
    default: return false;
  }
  return true;
}

bool array_3d_descriptor(const cudaChannelFormatDesc* desc, cudaExtent extent, CUDA_ARRAY3D_DESCRIPTOR* out) {
  *out = CUDA_ARRAY3D_DESCRIPTOR{};
  out->Width = extent.width;
  out->Height = extent.height;
  out->Depth = extent.depth;
  return array_format(desc, &out->Format, &out->NumChannels);
}

}  // namespace

extern "C" {

cudaError_t cudaMallocHost(void** pointer, size_t size) { return call_driver(&Driver::mem_alloc_host, pointer, size); }

cudaError_t cudaHostAlloc(void** pointer, size_t size, unsigned int flags) {
  return call_driver(&Driver::mem_host_alloc, pointer, size, flags);
}

cudaError_t cudaFreeHost(void* pointer) { return call_driver(&Driver::mem_free_host, pointer); }

cudaError_t cudaHostRegister(void* pointer, size_t size, unsigned int flags) {
  return call_driver(&Driver::mem_host_register, pointer, size, flags);
}

cudaError_t cudaHostUnregister(void* pointer) { return call_driver(&Driver::mem_host_unregister, pointer); }

// A runtime array handle is the driver's array.
cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width, size_t height,
                            unsigned int) {
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = width;
  d.Height = height;
  if (!array || !array_format(desc, &d.Format, &d.NumChannels)) return cudaErrorInvalidValue;
  return call_driver(&Driver::array_create, reinterpret_cast<CUarray*>(array), &d);
}

cudaError_t cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                              unsigned int flags) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  if (!array || !array_3d_descriptor(desc, extent, &d)) return cudaErrorInvalidValue;
  d.Flags = flags;  // cudaArrayDeferredMapping is CUDA_ARRAY3D_DEFERRED_MAPPING
  return call_driver(&Driver::array_3d_create, reinterpret_cast<CUarray*>(array), &d);
}

cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent extent,
                                     unsigned int levels, unsigned int flags) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  if (!array || !array_3d_descriptor(desc, extent, &d)) return cudaErrorInvalidValue;
  d.Flags = flags;
  return call_driver(&Driver::mipmapped_array_create, reinterpret_cast<CUmipmappedArray*>(array), &d, levels);
}

cudaError_t cudaFreeArray(cudaArray_t array) {
  return call_driver(&Driver::array_destroy, reinterpret_cast<CUarray>(array));
}

cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t array) {
  return call_driver(&Driver::mipmapped_array_destroy, reinterpret_cast<CUmipmappedArray>(array));
}

// extent.height * extent.depth rows of extent.width bytes, each row padded like cudaMallocPitch's.
cudaError_t cudaMalloc3D(cudaPitchedPtr* pitched, cudaExtent extent) {
  if (!pitched) return cudaErrorInvalidValue;
  void* pointer = nullptr;
  size_t pitch = 0;
  cudaError_t error = cudaMallocPitch(&pointer, &pitch, extent.width, extent.height * extent.depth);
  if (error == cudaSuccess) *pitched = cudaPitchedPtr{pointer, pitch, extent.width, extent.height};
  return error;
}

cudaError_t cudaIpcOpenMemHandle(void** pointer, cudaIpcMemHandle_t handle, unsigned int flags) {
  if (!pointer) return cudaErrorInvalidValue;
  CUipcMemHandle driver_handle;
  static_assert(sizeof driver_handle.reserved == sizeof handle.reserved, "the two IPC handles are one");
  std::memcpy(driver_handle.reserved, handle.reserved, sizeof handle.reserved);
  return call_driver(&Driver::ipc_open_mem_handle, reinterpret_cast<CUdeviceptr*>(pointer), driver_handle, flags);
}

cudaError_t cudaIpcCloseMemHandle(void* pointer) {
  return call_driver(&Driver::ipc_close_mem_handle, reinterpret_cast<CUdeviceptr>(pointer));
}

// Resets the current device's primary context (the driver frees its allocations with it).
cudaError_t cudaDeviceReset() {
  return with_driver([](const Driver& d) {
    CUdevice device = 0;
    cudaError_t error = to_runtime_error(d.ctx_get_device(&device));
    return error == cudaSuccess ? to_runtime_error(d.device_primary_ctx_reset(device)) : error;
  });
}

// A stream of the current device: stream-ordered allocations on it come from that device's pool, whichever
// device is current when they are made.
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return with_driver([&](const Driver& d) { return to_runtime_error(d.stream_create(stream, CU_STREAM_DEFAULT)); });
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return with_driver([&](const Driver& d) { return to_runtime_error(d.stream_destroy(stream)); });
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return call_driver(&Driver::stream_begin_capture, stream, static_cast<CUstreamCaptureMode>(mode));
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return call_driver(&Driver::stream_begin_capture_ptsz, stream, static_cast<CUstreamCaptureMode>(mode));
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return call_driver(&Driver::stream_end_capture, stream, graph);
}
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  return call_driver(&Driver::stream_end_capture_ptsz, stream, graph);
}

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  return call_driver(&Driver::graph_create, graph, flags);
}

cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                     size_t count, cudaMemAllocNodeParams* params) {
  if (!params) return cudaErrorInvalidValue;
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = static_cast<CUmemLocationType>(params->poolProps.location.type);
  p.poolProps.location.id = params->poolProps.location.id;
  p.bytesize = params->bytesize;
  cudaError_t error = call_driver(&Driver::graph_add_mem_alloc_node, node, graph, dependencies, count, &p);
  if (error == cudaSuccess) params->dptr = reinterpret_cast<void*>(p.dptr);
  return error;
}

cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                    size_t count, void* pointer) {
  return call_driver(&Driver::graph_add_mem_free_node, node, graph, dependencies, count,
                     reinterpret_cast<CUdeviceptr>(pointer));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return call_driver(&Driver::graph_instantiate, exec, graph, flags);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return call_driver(&Driver::graph_instantiate_with_flags, exec, graph, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return call_driver(&Driver::graph_launch, exec, stream);
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  return call_driver(&Driver::graph_launch_ptsz, exec, stream);
}

}  // extern "C"
