// The fake driver's "device memory": host memory with a per-device capacity.
//
// Every device has FAKECUDA_TOTAL_BYTES of capacity (default 1 GiB) and there are FAKECUDA_DEVICES devices
// (default 2). Allocations are anonymous mmap()s with MAP_NORESERVE, so a capacity of gigabytes costs
// nothing until a test touches the pages. A request larger than the device's free bytes fails the way
// the real driver does (CUDA_ERROR_OUT_OF_MEMORY) and leaves the accounting unchanged.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fakecuda {

// How a block of fake device memory was obtained; decides whether it is charged to its device.
enum class MemoryKind {
  kDevice,    // cuMemAlloc / cuMemAllocPitch: charged
  kPool,      // cuMemAllocAsync / cuMemAllocFromPoolAsync: charged (the pool releases it at free)
  kManaged,   // cuMemAllocManaged: not charged (managed pages migrate on demand; no device reservation)
  kPhysical,  // cuMemCreate: charged, has no address (the handle is what identifies it)
  kArray,     // cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate: charged (the array's backing memory)
  kHost,      // cuMemAllocHost / cuMemHostAlloc: page-locked host memory, never charged to a device
  kImported,  // cuIpcOpenMemHandle, cuExternalMemoryGetMappedBuffer: another process's (or API's) memory
  kGraph,     // a graph's memory node (cuGraphAddMemAllocNode, an allocation during stream capture): an
              // address only; the double runs no graph, so the memory is never charged
};

// What a context's destruction (cuCtxDestroy, cuDevicePrimaryCtxReset) frees, as the real driver does:
// everything allocated in it except VMM handles (cuMemCreate) and imports.
bool freed_with_context(MemoryKind kind);

int device_count();
uint64_t device_total_bytes();
// Bytes of `device` not charged to any live allocation. `device` must be valid.
uint64_t device_free_bytes(int device);
bool device_valid(int device);

// Allocates `size` bytes of host memory charged to `device` (unless kManaged, kHost, kImported or kGraph),
// made in `context` (the context destroyed with it; null: none). Returns 0 when the device has less than
// `size` free bytes or the host refuses the mapping.
uintptr_t memory_allocate(int device, uint64_t size, MemoryKind kind, const void* context = nullptr);
// Frees every allocation made in `context` that freed_with_context() says goes with it; returns how many.
int memory_free_context(const void* context);
// Releases an allocation made by memory_allocate. Returns false (and does nothing) for an address that
// is not the start of a live allocation.
bool memory_free(uintptr_t address);
// Device and size of the live allocation containing `address`; false when there is none. `context`, when
// given, gets the context it was made in (null: none).
bool memory_lookup(uintptr_t address, int* device, uintptr_t* start, uint64_t* size, MemoryKind* kind,
                   const void** context = nullptr);

// Physical allocations (cuMemCreate): a charge without an address, identified by a handle.
uint64_t physical_create(int device, uint64_t size);  // 0 when the device is out of memory
// A handle never charged to a device: an import (cuMemImportFromShareableHandle: another process's memory)
// or host memory (cuMemCreate with a host location).
uint64_t physical_import(int device, uint64_t size);
bool physical_release(uint64_t handle);
bool physical_lookup(uint64_t handle, int* device, uint64_t* size);

}  // namespace fakecuda
