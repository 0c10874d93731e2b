// The fake driver's imports of memory that is not this process's: IPC handles, external memory and
// shareable VMM handles. There is no other process: what it "exported" is described by the handle itself.
//   - CUipcMemHandle: bytes 0-7 the size of the other process's allocation, bytes 8-11 its device (both
//     little-endian). Opening maps a fresh region of that size (never charged here); closing unmaps it.
//   - cuMemImportFromShareableHandle: the OS handle's value is the allocation's size; the device is the
//     current one. The result is a VMM handle like cuMemCreate's (map, unmap and release work), not charged.
//   - cuImportExternalMemory: an object of desc->size bytes on the current device; buffers mapped from it
//     are regions freed by cuMemFree.
#include <cstring>

#include "device_memory.h"
#include "driver_internal.h"

using namespace fakecuda;

struct CUextMemory_st {
  int device;
  unsigned long long size;
};

extern "C" {

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned int) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pointer) return CUDA_ERROR_INVALID_VALUE;
  uint64_t size = 0;
  int32_t device = 0;
  std::memcpy(&size, handle.reserved, sizeof size);
  std::memcpy(&device, handle.reserved + 8, sizeof device);
  if (size == 0 || !device_valid(device)) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t address = memory_allocate(device, size, MemoryKind::kImported, current_context());
  if (!address) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = address;
  return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr pointer) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  int device = 0;
  uintptr_t start = 0;
  uint64_t size = 0;
  MemoryKind kind;
  if (!memory_lookup(pointer, &device, &start, &size, &kind) || start != pointer || kind != MemoryKind::kImported)
    return CUDA_ERROR_INVALID_VALUE;
  memory_free(pointer);
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr pointer) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  int device = 0;
  uintptr_t start = 0;
  uint64_t bytes = 0;
  MemoryKind kind;
  if (!memory_lookup(pointer, &device, &start, &bytes, &kind)) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = start;
  if (size) *size = bytes;
  return CUDA_SUCCESS;
}

CUresult cuImportExternalMemory(CUexternalMemory* memory, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* desc) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!memory || !desc || desc->size == 0) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  CUresult result = current_device(&device);
  if (result != CUDA_SUCCESS) return result;
  *memory = new CUextMemory_st{device, desc->size};
  return CUDA_SUCCESS;
}

CUresult cuDestroyExternalMemory(CUexternalMemory memory) {
  if (!memory) return CUDA_ERROR_INVALID_VALUE;
  delete memory;
  return CUDA_SUCCESS;
}

CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr* pointer, CUexternalMemory memory,
                                         const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* desc) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pointer || !memory || !desc || desc->size == 0 || desc->offset + desc->size > memory->size)
    return CUDA_ERROR_INVALID_VALUE;
  uintptr_t address = memory_allocate(memory->device, desc->size, MemoryKind::kImported, current_context());
  if (!address) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = address;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  uint64_t size = reinterpret_cast<uintptr_t>(os_handle);
  if (!handle || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  CUresult result = current_device(&device);
  if (result != CUDA_SUCCESS) return result;
  *handle = physical_import(device, size);
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  int device = 0;
  uint64_t size = 0;
  if (!prop || !physical_lookup(handle, &device, &size)) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = device;
  return CUDA_SUCCESS;
}

}  // extern "C"
