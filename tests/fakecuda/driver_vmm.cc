// The fake driver's virtual memory management (cuMemCreate / cuMemAddressReserve / cuMemMap ...), the
// path of PyTorch's expandable segments and of JAX/XLA. Physical allocations are charged to their device
// from cuMemCreate to cuMemRelease; reserved address ranges are PROT_NONE host mappings that cuMemSetAccess
// makes readable and writable where something is mapped.
#include <sys/mman.h>

#include <map>
#include <mutex>

#include "cupti_callbacks.h"
#include "device_memory.h"
#include "driver_internal.h"

using namespace fakecuda;

namespace {

// Granularity of physical allocations and mappings (the value current GPUs report: 2 MiB).
constexpr size_t kGranularityBytes = 2u << 20;

struct Mapping {
  size_t size;
  CUmemGenericAllocationHandle handle;
};

struct VirtualState {
  std::mutex lock;
  std::map<CUdeviceptr, size_t> reservations;  // start -> size
  std::map<CUdeviceptr, Mapping> mappings;     // start -> mapped range
};

VirtualState& vstate() {
  static VirtualState* s = new VirtualState();
  return *s;
}

bool aligned(size_t value) { return value % kGranularityBytes == 0; }

// True when [ptr, ptr + size) lies inside one reservation. Caller holds the lock.
bool inside_reservation(const VirtualState& s, CUdeviceptr ptr, size_t size) {
  auto it = s.reservations.upper_bound(ptr);
  if (it == s.reservations.begin()) return false;
  --it;
  return ptr >= it->first && ptr + size <= it->first + it->second;
}

}  // namespace

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags) {
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularityBytes;
  return CUDA_SUCCESS;
}

static CUresult cuMemCreate_untraced(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                     unsigned long long flags) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !prop || flags != 0 || size == 0 || !aligned(size)) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  CUmemLocationType where = prop->location.type;
  if (where == CU_MEM_LOCATION_TYPE_HOST || where == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
      where == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
    int device = 0;  // page-locked host memory: charged to no device (the double files it under device 0)
    *handle = physical_import(device, size);
    return CUDA_SUCCESS;
  }
  if (where != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  uint64_t created = physical_create(prop->location.id, size);
  if (!created) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = created;
  return CUDA_SUCCESS;
}

static CUresult cuMemRelease_untraced(CUmemGenericAllocationHandle handle) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return physical_release(handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult cuMemAddressReserve_untraced(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                             unsigned long long flags) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!ptr || size == 0 || !aligned(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment != 0 && alignment > kGranularityBytes) return CUDA_ERROR_INVALID_VALUE;
  (void)addr;  // a hint only, as in the real driver
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  VirtualState& s = vstate();
  std::lock_guard<std::mutex> guard(s.lock);
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  s.reservations[*ptr] = size;
  return CUDA_SUCCESS;
}

static CUresult cuMemAddressFree_untraced(CUdeviceptr ptr, size_t size) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  VirtualState& s = vstate();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

static CUresult cuMemMap_untraced(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                  unsigned long long flags) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  int device = 0;
  uint64_t physical_size = 0;
  if (flags != 0 || size == 0 || !aligned(size) || !physical_lookup(handle, &device, &physical_size) ||
      offset + size > physical_size)
    return CUDA_ERROR_INVALID_VALUE;
  VirtualState& s = vstate();
  std::lock_guard<std::mutex> guard(s.lock);
  if (!inside_reservation(s, ptr, size) || s.mappings.count(ptr)) return CUDA_ERROR_INVALID_VALUE;
  s.mappings[ptr] = Mapping{size, handle};
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  VirtualState& s = vstate();
  std::lock_guard<std::mutex> guard(s.lock);
  if (!inside_reservation(s, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  mprotect(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE);
  return CUDA_SUCCESS;
}

// Unmaps every mapping that starts inside [ptr, ptr + size); the range must cover them whole.
static CUresult cuMemUnmap_untraced(CUdeviceptr ptr, size_t size) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  VirtualState& s = vstate();
  std::lock_guard<std::mutex> guard(s.lock);
  auto first = s.mappings.lower_bound(ptr);
  auto last = first;
  while (last != s.mappings.end() && last->first < ptr + size) {
    if (last->first + last->second.size > ptr + size) return CUDA_ERROR_INVALID_VALUE;
    ++last;
  }
  if (first == last) return CUDA_ERROR_INVALID_VALUE;
  s.mappings.erase(first, last);
  void* range = reinterpret_cast<void*>(ptr);
  mprotect(range, size, PROT_NONE);
  madvise(range, size, MADV_DONTNEED);
  return CUDA_SUCCESS;
}

// What a CUPTI subscriber sees (cupti_callbacks.h): each function between its API_ENTER and API_EXIT.

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  cuMemCreate_params params{handle, size, prop, flags};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, "cuMemCreate", &params,
                      [&] { return cuMemCreate_untraced(handle, size, prop, flags); });
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  cuMemRelease_params params{handle};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, "cuMemRelease", &params,
                      [&] { return cuMemRelease_untraced(handle); });
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  cuMemAddressReserve_params params{ptr, size, alignment, addr, flags};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, "cuMemAddressReserve", &params,
                      [&] { return cuMemAddressReserve_untraced(ptr, size, alignment, addr, flags); });
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  cuMemAddressFree_params params{ptr, size};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, "cuMemAddressFree", &params,
                      [&] { return cuMemAddressFree_untraced(ptr, size); });
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  cuMemMap_params params{ptr, size, offset, handle, flags};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemMap, "cuMemMap", &params,
                      [&] { return cuMemMap_untraced(ptr, size, offset, handle, flags); });
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  cuMemUnmap_params params{ptr, size};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, "cuMemUnmap", &params,
                      [&] { return cuMemUnmap_untraced(ptr, size); });
}

}  // extern "C"
