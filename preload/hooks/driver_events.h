// What a CUDA driver memory call did, as trace events, from its arguments and its result: one function per
// driver function, called after the call by the driver hooks (driver_hooks.cc) and at API exit by the injected
// tracer's CUPTI callback (attach/cupti_source.cc), so that both paths record the same events for the same call.
// Each records nothing for a failure other than running out of memory (hook_events.h: record_alloc). Pointer
// arguments are the call's own (read after the call: the address, handle or pitch it returned). The calling
// thread, the outermost hook only, never under a lock. Inline, always: a hook's own frames before the recorder are
// what stack_capture.cc makes room for (5 in an optimized build), so these add none.
#pragma once
#include <cstddef>

#include "hooks/array_bytes.h"
#include "hooks/hook_events.h"
#include "hooks/resolver.h"

namespace memtrace {

// cuMemAlloc_v2: device memory of the current device.
void driver_mem_alloc_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize);
// cuMemAllocPitch_v2: `height` rows of *pitch bytes (of `width` bytes when it failed).
void driver_mem_alloc_pitch_done(CUresult r, const CUdeviceptr* dptr, const size_t* pitch, size_t width, size_t height);
// cuMemAllocManaged: managed memory.
void driver_mem_alloc_managed_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize);
// cuMemAllocAsync(_ptsz): a block of the current device's pool (`per_thread_stream`: the _ptsz entry point).
void driver_mem_alloc_async_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize, CUstream stream,
                                 bool per_thread_stream);
// cuMemAllocFromPoolAsync(_ptsz): a block of an explicit pool, charged to the device the block is on.
void driver_mem_alloc_from_pool_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize, CUstream stream,
                                     bool per_thread_stream);
// cuMemCreate: physical memory, keyed by its handle; host memory where `prop` puts it on the host.
void driver_mem_create_done(CUresult r, const CUmemGenericAllocationHandle* handle, size_t size,
                            const CUmemAllocationProp* prop);
// cuMemMap / cuMemUnmap / cuMemAddressReserve / cuMemAddressFree: recorded when they succeeded.
void driver_mem_map_done(CUresult r, CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle);
void driver_mem_unmap_done(CUresult r, CUdeviceptr ptr, size_t size);
void driver_address_reserve_done(CUresult r, const CUdeviceptr* ptr, size_t size);
void driver_address_free_done(CUresult r, CUdeviceptr ptr, size_t size);
// cuMemAllocHost_v2 (kCuMemAllocHost) / cuMemHostAlloc (kCuMemHostAlloc): page-locked host memory.
void driver_host_alloc_done(Api api, CUresult r, void* const* pp, size_t bytesize);
// cuMemHostRegister_v2: host memory registered with the driver.
void driver_host_register_done(CUresult r, const void* p, size_t bytesize);
// cuArrayCreate_v2 / cuArray3DCreate_v2 / cuMipmappedArrayCreate: sized as array_bytes.h says.
void driver_array_create_done(CUresult r, const CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc);
void driver_array_3d_create_done(CUresult r, const CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc);
void driver_mipmapped_array_create_done(CUresult r, const CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                        unsigned int levels);

// ---- definitions -------------------------------------------------------------------------------------------

[[gnu::always_inline]] inline void driver_mem_alloc_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize) {
  on_device_alloc(Api::kCuMemAlloc, r == CUDA_SUCCESS, r == kDriverOom, dptr ? *dptr : 0, bytesize, r);
}

[[gnu::always_inline]] inline void driver_mem_alloc_pitch_done(CUresult r, const CUdeviceptr* dptr, const size_t* pitch,
                                                               size_t width, size_t height) {
  bool ok = r == CUDA_SUCCESS;
  on_device_alloc(Api::kCuMemAllocPitch, ok, r == kDriverOom, ok ? *dptr : 0, ok ? *pitch * height : width * height, r);
}

[[gnu::always_inline]] inline void driver_mem_alloc_managed_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize) {
  record_context_alloc({.layer = Layer::kDriver,
                        .api = Api::kCuMemAllocManaged,
                        .device = current_device(),
                        .address = dptr ? *dptr : 0,
                        .size = bytesize,
                        .result = r,
                        .memory = Memory::kManaged},
                       r == CUDA_SUCCESS, r == kDriverOom);
}

[[gnu::always_inline]] inline void driver_mem_alloc_async_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize,
                                                               CUstream stream, bool per_thread_stream) {
  record_async_alloc({.layer = Layer::kBlock,
                      .api = Api::kCuMemAllocAsync,
                      .device = kDeviceUnresolved,
                      .stream = stream_value(stream),
                      .address = dptr ? *dptr : 0,
                      .size = bytesize,
                      .result = r},
                     r == CUDA_SUCCESS, r == kDriverOom, per_thread_stream);
}

[[gnu::always_inline]] inline void driver_mem_alloc_from_pool_done(CUresult r, const CUdeviceptr* dptr, size_t bytesize,
                                                                   CUstream stream, bool per_thread_stream) {
  bool ok = r == CUDA_SUCCESS;
  uint64_t address = ok && dptr ? *dptr : 0;
  record_async_alloc({.layer = Layer::kBlock,
                      .api = Api::kCuMemAllocFromPoolAsync,
                      .device = pool_block_device(ok, address),
                      .stream = stream_value(stream),
                      .address = address,
                      .size = bytesize,
                      .result = r},
                     ok, r == kDriverOom, per_thread_stream);
}

[[gnu::always_inline]] inline void driver_mem_create_done(CUresult r, const CUmemGenericAllocationHandle* handle,
                                                          size_t size, const CUmemAllocationProp* prop) {
  bool host = prop && host_location(prop->location.type);
  int device = host                                                         ? current_device()
               : prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id
                                                                            : -1;
  record_alloc({.layer = Layer::kDriver,
                .api = Api::kCuMemCreate,
                .device = device,
                .address = handle ? *handle : 0,
                .size = size,
                .result = r,
                .memory = host ? Memory::kHostPinned : Memory::kDevice},
               r == CUDA_SUCCESS, r == kDriverOom);
}

[[gnu::always_inline]] inline void driver_mem_map_done(CUresult r, CUdeviceptr ptr, size_t size,
                                                       CUmemGenericAllocationHandle handle) {
  if (r == CUDA_SUCCESS) on_other(EventKind::kMap, Api::kCuMemMap, ptr, size, handle);
}

[[gnu::always_inline]] inline void driver_mem_unmap_done(CUresult r, CUdeviceptr ptr, size_t size) {
  if (r == CUDA_SUCCESS) on_other(EventKind::kUnmap, Api::kCuMemUnmap, ptr, size, 0);
}

[[gnu::always_inline]] inline void driver_address_reserve_done(CUresult r, const CUdeviceptr* ptr, size_t size) {
  if (r == CUDA_SUCCESS) on_other(EventKind::kAddressReserve, Api::kCuMemAddressReserve, *ptr, size, 0);
}

[[gnu::always_inline]] inline void driver_address_free_done(CUresult r, CUdeviceptr ptr, size_t size) {
  if (r == CUDA_SUCCESS) on_other(EventKind::kAddressFree, Api::kCuMemAddressFree, ptr, size, 0);
}

[[gnu::always_inline]] inline void driver_host_alloc_done(Api api, CUresult r, void* const* pp, size_t bytesize) {
  record_context_alloc({.layer = Layer::kDriver,
                        .api = api,
                        .device = current_device(),
                        .address = pp ? ptr_value(*pp) : 0,
                        .size = bytesize,
                        .result = r,
                        .memory = Memory::kHostPinned},
                       r == CUDA_SUCCESS, r == kDriverOom);
}

[[gnu::always_inline]] inline void driver_host_register_done(CUresult r, const void* p, size_t bytesize) {
  record_alloc({.layer = Layer::kDriver,
                .api = Api::kCuMemHostRegister,
                .device = current_device(),
                .address = ptr_value(p),
                .size = bytesize,
                .result = r,
                .memory = Memory::kHostRegistered},
               r == CUDA_SUCCESS, false);
}

// ---- arrays: sized as the runtime's arrays are (array_bytes.h) ------------------------------------------------

namespace driver_events_detail {
template <typename Descriptor>
uint64_t driver_element_bytes(const Descriptor* desc) {
  return desc ? driver_format_element_bytes(desc->Format, desc->NumChannels) : 0;
}

// An array made (`r`) with `handle_out` its handle: sized by the driver when it can say (`driver_bytes`;
// deferred-mapping arrays only), else `element_bytes`.
template <typename Handle>
[[gnu::always_inline]] inline void record_array(Api api, CUresult r, const Handle* handle_out,
                                                uint64_t (*driver_bytes)(Handle, int), uint64_t element_bytes) {
  bool ok = r == CUDA_SUCCESS;
  int device = current_device();
  uint64_t bytes = ok ? driver_bytes(*handle_out, device) : 0;
  record_context_alloc({.layer = Layer::kDriver,
                        .api = api,
                        .device = device,
                        .address = ok ? ptr_value(*handle_out) : 0,
                        .size = bytes ? bytes : element_bytes,
                        .result = r,
                        .memory = Memory::kArray},
                       ok, r == kDriverOom);
}
}  // namespace driver_events_detail

[[gnu::always_inline]] inline void driver_array_create_done(CUresult r, const CUarray* handle,
                                                            const CUDA_ARRAY_DESCRIPTOR* desc) {
  driver_events_detail::record_array(Api::kCuArrayCreate, r, handle, array_bytes,
                                     desc ? array_element_bytes(desc->Width, desc->Height, 0,
                                                                driver_events_detail::driver_element_bytes(desc), 1)
                                          : 0);
}

[[gnu::always_inline]] inline void driver_array_3d_create_done(CUresult r, const CUarray* handle,
                                                               const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  driver_events_detail::record_array(Api::kCuArray3DCreate, r, handle, array_bytes,
                                     desc ? array_element_bytes(desc->Width, desc->Height, desc->Depth,
                                                                driver_events_detail::driver_element_bytes(desc), 1)
                                          : 0);
}

[[gnu::always_inline]] inline void driver_mipmapped_array_create_done(CUresult r, const CUmipmappedArray* handle,
                                                                      const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                                      unsigned int levels) {
  driver_events_detail::record_array(Api::kCuMipmappedArrayCreate, r, handle, mipmapped_array_bytes,
                                     desc
                                         ? array_element_bytes(desc->Width, desc->Height, desc->Depth,
                                                               driver_events_detail::driver_element_bytes(desc), levels)
                                         : 0);
}

}  // namespace memtrace
