// The resolver (resolver.cc): what each hook forwards to, our dlsym / cuGetProcAddress wrappers that hand
// our hooks out in place of the driver's and runtime's functions, and the driver's own functions the tracer
// asks for facts (the current device, a pointer's device...), never a public entry point of ours.
#pragma once
#include <cstdint>

#include "hooks/hook_table.h"

namespace memtrace {

// If `real` is the function behind one of our hooks (by exported name), remembers it and returns our
// wrapper; otherwise returns `real`. Also remembers the driver helpers below.
void* substitute_by_symbol(const char* symbol, void* real);

// Driver functions the hooks call for facts about what they saw: the driver's own, never a public entry
// point of ours (the resolver remembers what cuGetProcAddress / dlsym returned for them, see resolver.cc).
// Each answers "unknown" (-1 / false) when the driver is not reachable or refuses.

// Driver functions the tracer asks for facts, never handed out (resolver.cc's g_helpers has one row each:
// the cuGetProcAddress name and version range of the ABI used).
enum HelperId : int {
  kCtxGetDevice,
  kCtxGetDeviceOfContext,
  kMemGetInfo,
  kPointerGetAttribute,
  kArrayGetMemoryRequirements,
  kMipmappedArrayGetMemoryRequirements,
  kMemGetAddressRange,
  kMemGetAllocationPropertiesFromHandle,
  kStreamGetCaptureInfo,
  kCtxGetCurrent,
  kMemPoolGetAttribute,
  kDeviceGetMemPool,
  kDeviceGetGraphMemAttribute,
  kDeviceGetPCIBusId,
  kDeviceGetUuid,
  kDeviceGetName,
  kDeviceTotalMem,
  kHelperCount
};

// The driver's own function `id`: the one the runtime looked up or a program dlsym()ed, else found in
// libcuda.so.1 by its exported name; null when the driver is not loaded or lacks it.
void* driver_helper(HelperId id);

// cuCtxGetDevice: the calling thread's current device.
int current_device();
// cuCtxGetCurrent: the calling thread's current CUcontext, as an integer (0 when none or unknown). The
// context an allocation is made in is the one whose destruction frees it (memtrace.proto: Event.context).
uint64_t current_context();
// cuMemGetInfo_v2: free and total bytes of the current device.
bool device_memory_info(uint64_t* free_bytes, uint64_t* total_bytes);
// The device ordinal `address` belongs to (cuPointerGetAttribute, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), for
// allocations from an explicit pool, which may belong to any device; `fallback` when the driver cannot say.
int device_of_pointer(uint64_t address, int fallback);
// The device of `context` (cuCtxGetDevice_v2 of CUDA 13.0; older drivers lack it: then the current
// device, if `context` is the current context). -1 when unknown.
int device_of_context(CUcontext context);
// Bytes the driver set aside for a CUDA array / mipmapped array on `device`
// (cuArrayGetMemoryRequirements / cuMipmappedArrayGetMemoryRequirements, CUDA 11.6: `size` of
// CUDA_ARRAY_MEMORY_REQUIREMENTS). 0 when unknown, which is every array made without
// CUDA_ARRAY3D_DEFERRED_MAPPING (see array_bytes.h).
uint64_t array_bytes(CUarray array, int device);
uint64_t mipmapped_array_bytes(CUmipmappedArray array, int device);
// Size of the allocation that starts at `address` (cuMemGetAddressRange_v2). 0 when unknown.
uint64_t allocation_range_bytes(uint64_t address);
// The device a VMM allocation handle's memory lives on (cuMemGetAllocationPropertiesFromHandle), -1 when
// it is not device memory or unknown.
int device_of_handle(uint64_t handle);
// The id of the stream capture `stream` is in (cuStreamGetCaptureInfo_v3: status ACTIVE), 0 when the
// stream is not capturing or the driver cannot say. One driver call. `per_thread_stream`: the call came
// through a _ptsz entry point, where stream 0 is the per-thread default stream, not the legacy one.
uint64_t stream_capture_id(uint64_t stream, bool per_thread_stream);

// glibc's dlsym, bypassing our interposed one.
void* real_dlsym(void* handle, const char* name);

// True when `fn` is code of libmemtrace.so itself (one of our exported wrappers).
bool is_own_function(const void* fn);

}  // namespace memtrace
