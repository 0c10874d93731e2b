// The fake driver's allocation functions: linear device memory, pitched, managed and stream-ordered
// (pool) allocations. Streams are accepted and ignored: every operation completes at once.
#include <cstring>

#include "cupti_callbacks.h"
#include "device_memory.h"
#include "driver_internal.h"
#include "driver_pools.h"

using namespace fakecuda;

namespace {

// cuMemAllocPitch rounds each row up to this many bytes (the texture pitch alignment of current GPUs).
constexpr size_t kPitchAlignmentBytes = 512;

// An explicit pool's blocks belong to its device's primary context.
CUresult allocate_on(int device, CUdeviceptr* pointer, size_t size, MemoryKind kind) {
  if (!pointer || size == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t address = memory_allocate(device, size, kind, primary_context(device));
  if (!address) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = address;
  return CUDA_SUCCESS;
}

CUresult free_pointer(CUdeviceptr pointer);

CUresult allocate_current(CUdeviceptr* pointer, size_t size, MemoryKind kind) {
  int device = 0;
  CUresult result = current_device(&device);
  if (result != CUDA_SUCCESS) return result;
  if (!pointer || size == 0) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t address = memory_allocate(device, size, kind, current_context());
  if (!address) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = address;
  return CUDA_SUCCESS;
}

// A stream-ordered allocation: a graph memory node while `stream` is capturing. It is made in the stream's
// context, from the current pool of that context's device, whichever device is current.
CUresult allocate_async(CUdeviceptr* pointer, size_t size, CUstream stream, bool per_thread_stream) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext context = stream_context(stream);
  if (!context) return CUDA_ERROR_INVALID_CONTEXT;
  if (!pointer || size == 0) return CUDA_ERROR_INVALID_VALUE;
  bool capturing = stream_capturing(stream, per_thread_stream);
  uintptr_t address =
      memory_allocate(context->device, size, capturing ? MemoryKind::kGraph : MemoryKind::kPool, context);
  if (!address) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = address;
  if (!capturing) pool_block_allocated(current_pool(context->device), address, size);
  return CUDA_SUCCESS;
}

CUresult free_async(CUdeviceptr pointer, CUstream stream, bool per_thread_stream) {
  if (stream_capturing(stream, per_thread_stream)) return CUDA_SUCCESS;  // a free node: frees when run
  return free_pointer(pointer);
}

CUresult free_pointer(CUdeviceptr pointer) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pointer == 0) return CUDA_SUCCESS;
  pool_block_freed(pointer);  // nothing when it is not a pool block
  if (driver_torn_down()) {
    memory_free(pointer);
    return CUDA_ERROR_DEINITIALIZED;
  }
  if (!memory_free(pointer)) return CUDA_ERROR_INVALID_VALUE;
  run_after_free_hook(pointer);
  return CUDA_SUCCESS;
}

CUresult allocate_from_pool(CUdeviceptr* pointer, size_t size, CUmemoryPool pool, CUstream stream,
                            bool per_thread_stream) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  bool capturing = stream_capturing(stream, per_thread_stream);
  CUresult result = allocate_on(pool->device, pointer, size, capturing ? MemoryKind::kGraph : MemoryKind::kPool);
  if (result == CUDA_SUCCESS && !capturing) pool_block_allocated(pool, *pointer, size);
  return result;
}

}  // namespace

extern "C" {

static CUresult cuMemAlloc_v2_untraced(CUdeviceptr* pointer, size_t size) {
  return allocate_current(pointer, size, MemoryKind::kDevice);
}

// Allocates height rows of `width` bytes, each row padded to kPitchAlignmentBytes; *pitch gets the
// padded row length. element_size must be 4, 8 or 16 (cuda.h).
static CUresult cuMemAllocPitch_v2_untraced(CUdeviceptr* pointer, size_t* pitch, size_t width, size_t height,
                                            unsigned int element_size) {
  if (!pitch || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element_size != 4 && element_size != 8 && element_size != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t row = (width + kPitchAlignmentBytes - 1) / kPitchAlignmentBytes * kPitchAlignmentBytes;
  CUresult result = allocate_current(pointer, row * height, MemoryKind::kDevice);
  if (result == CUDA_SUCCESS) *pitch = row;
  return result;
}

static CUresult cuMemFree_v2_untraced(CUdeviceptr pointer) { return free_pointer(pointer); }

static CUresult cuMemAllocManaged_untraced(CUdeviceptr* pointer, size_t size, unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return allocate_current(pointer, size, MemoryKind::kManaged);
}

static CUresult cuMemAllocAsync_untraced(CUdeviceptr* pointer, size_t size, CUstream stream) {
  return allocate_async(pointer, size, stream, false);
}
static CUresult cuMemAllocAsync_ptsz_untraced(CUdeviceptr* pointer, size_t size, CUstream stream) {
  return allocate_async(pointer, size, stream, true);
}

static CUresult cuMemAllocFromPoolAsync_untraced(CUdeviceptr* pointer, size_t size, CUmemoryPool pool,
                                                 CUstream stream) {
  return allocate_from_pool(pointer, size, pool, stream, false);
}
static CUresult cuMemAllocFromPoolAsync_ptsz_untraced(CUdeviceptr* pointer, size_t size, CUmemoryPool pool,
                                                      CUstream stream) {
  return allocate_from_pool(pointer, size, pool, stream, true);
}

static CUresult cuMemFreeAsync_untraced(CUdeviceptr pointer, CUstream stream) {
  return free_async(pointer, stream, false);
}
static CUresult cuMemFreeAsync_ptsz_untraced(CUdeviceptr pointer, CUstream stream) {
  return free_async(pointer, stream, true);
}

// Answers the attributes a profiler asks about an address: its device, the context it was made in, its
// allocation's range and its memory type. Anything else is CUDA_ERROR_INVALID_VALUE.
CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  uintptr_t start = 0;
  uint64_t size = 0;
  MemoryKind kind;
  const void* context = nullptr;
  if (!memory_lookup(pointer, &device, &start, &size, &kind, &context)) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = device; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:  // null for memory made in no context (an import)
      *static_cast<CUcontext*>(data) = static_cast<CUcontext>(const_cast<void*>(context));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = start; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:  // null for memory that is not a pool block
      *static_cast<CUmemoryPool*>(data) = pool_of_block(start);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = kind == MemoryKind::kManaged ? CU_MEMORYTYPE_UNIFIED
                                          : kind == MemoryKind::kHost  ? CU_MEMORYTYPE_HOST
                                                                       : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

// What a CUPTI subscriber sees (cupti_callbacks.h): each function between its API_ENTER and API_EXIT.

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t size) {
  cuMemAlloc_v2_params params{pointer, size};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &params,
                      [&] { return cuMemAlloc_v2_untraced(pointer, size); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* pointer, size_t* pitch, size_t width, size_t height,
                            unsigned int element_size) {
  cuMemAllocPitch_v2_params params{pointer, pitch, width, height, element_size};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, "cuMemAllocPitch_v2", &params,
                      [&] { return cuMemAllocPitch_v2_untraced(pointer, pitch, width, height, element_size); });
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  cuMemFree_v2_params params{pointer};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &params,
                      [&] { return cuMemFree_v2_untraced(pointer); });
}

CUresult cuMemAllocManaged(CUdeviceptr* pointer, size_t size, unsigned int flags) {
  cuMemAllocManaged_params params{pointer, size, flags};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, "cuMemAllocManaged", &params,
                      [&] { return cuMemAllocManaged_untraced(pointer, size, flags); });
}

CUresult cuMemAllocAsync(CUdeviceptr* pointer, size_t size, CUstream stream) {
  cuMemAllocAsync_params params{pointer, size, stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, "cuMemAllocAsync", &params,
                      [&] { return cuMemAllocAsync_untraced(pointer, size, stream); });
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* pointer, size_t size, CUstream stream) {
  cuMemAllocAsync_ptsz_params params{pointer, size, stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz", &params,
                      [&] { return cuMemAllocAsync_ptsz_untraced(pointer, size, stream); });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* pointer, size_t size, CUmemoryPool pool, CUstream stream) {
  cuMemAllocFromPoolAsync_params params{pointer, size, pool, stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", &params,
                      [&] { return cuMemAllocFromPoolAsync_untraced(pointer, size, pool, stream); });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* pointer, size_t size, CUmemoryPool pool, CUstream stream) {
  cuMemAllocFromPoolAsync_ptsz_params params{pointer, size, pool, stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz", &params,
                      [&] { return cuMemAllocFromPoolAsync_ptsz_untraced(pointer, size, pool, stream); });
}

CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  cuMemFreeAsync_params params{pointer, stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, "cuMemFreeAsync", &params,
                      [&] { return cuMemFreeAsync_untraced(pointer, stream); });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr pointer, CUstream stream) {
  cuMemFreeAsync_ptsz_params params{pointer, stream};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", &params,
                      [&] { return cuMemFreeAsync_ptsz_untraced(pointer, stream); });
}

}  // extern "C"
