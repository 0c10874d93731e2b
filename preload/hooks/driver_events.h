// What a CUDA driver memory call did, as trace events, from its arguments and its result: one function per
// driver function, called after the call by the driver hooks (driver_hooks.cc) and at API exit by the injected
// tracer's CUPTI callback (attach/cupti_source.cc), so that both paths record the same events for the same call.
// Each records nothing for a failure other than running out of memory (hook_events.h: record_alloc). Pointer
// arguments are the call's own (read after the call: the address, handle or pitch it returned). The calling
// thread, the outermost hook only, never under a lock.
#pragma once
#include <cstddef>

#include "hooks/hook_events.h"

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

}  // namespace memtrace
