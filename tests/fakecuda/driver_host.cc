// The fake driver's page-locked host memory: cuMemAllocHost / cuMemHostAlloc allocate host memory that is
// never charged to a device (it is freed with the context that made it, as the real driver does), and
// cuMemHostRegister / cuMemHostUnregister keep a table of registered ranges.
#include <map>
#include <mutex>

#include "cupti_callbacks.h"
#include "device_memory.h"
#include "driver_internal.h"

using namespace fakecuda;

namespace {

CUresult allocate_host(void** pointer, size_t size) {
  if (!pointer || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  CUresult result = current_device(&device);
  if (result != CUDA_SUCCESS) return result;
  uintptr_t address = memory_allocate(device, size, MemoryKind::kHost, current_context());
  if (!address) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<void*>(address);
  return CUDA_SUCCESS;
}

struct Registrations {
  std::mutex lock;
  std::map<uintptr_t, size_t> ranges;  // start -> bytes
};

Registrations& registrations() {
  static Registrations* r = new Registrations();
  return *r;
}

}  // namespace

extern "C" {

static CUresult cuMemAllocHost_v2_untraced(void** pointer, size_t size) { return allocate_host(pointer, size); }

static CUresult cuMemHostAlloc_untraced(void** pointer, size_t size, unsigned int) {
  return allocate_host(pointer, size);
}

static CUresult cuMemFreeHost_untraced(void* pointer) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (driver_torn_down()) {
    memory_free(reinterpret_cast<uintptr_t>(pointer));
    return CUDA_ERROR_DEINITIALIZED;
  }
  return memory_free(reinterpret_cast<uintptr_t>(pointer)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult cuMemHostRegister_v2_untraced(void* pointer, size_t size, unsigned int) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pointer || size == 0) return CUDA_ERROR_INVALID_VALUE;
  Registrations& r = registrations();
  std::lock_guard<std::mutex> guard(r.lock);
  if (!r.ranges.emplace(reinterpret_cast<uintptr_t>(pointer), size).second)
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  return CUDA_SUCCESS;
}

static CUresult cuMemHostUnregister_untraced(void* pointer) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registrations& r = registrations();
  std::lock_guard<std::mutex> guard(r.lock);
  return r.ranges.erase(reinterpret_cast<uintptr_t>(pointer)) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

// What a CUPTI subscriber sees (cupti_callbacks.h): each function between its API_ENTER and API_EXIT.

CUresult cuMemAllocHost_v2(void** pointer, size_t size) {
  cuMemAllocHost_v2_params params{pointer, size};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, "cuMemAllocHost_v2", &params,
                      [&] { return cuMemAllocHost_v2_untraced(pointer, size); });
}

CUresult cuMemHostAlloc(void** pointer, size_t size, unsigned int flags) {
  cuMemHostAlloc_params params{pointer, size, flags};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, "cuMemHostAlloc", &params,
                      [&] { return cuMemHostAlloc_untraced(pointer, size, flags); });
}

CUresult cuMemFreeHost(void* pointer) {
  cuMemFreeHost_params params{pointer};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, "cuMemFreeHost", &params,
                      [&] { return cuMemFreeHost_untraced(pointer); });
}

CUresult cuMemHostRegister_v2(void* pointer, size_t size, unsigned int flags) {
  cuMemHostRegister_v2_params params{pointer, size, flags};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, "cuMemHostRegister_v2", &params,
                      [&] { return cuMemHostRegister_v2_untraced(pointer, size, flags); });
}

CUresult cuMemHostUnregister(void* pointer) {
  cuMemHostUnregister_params params{pointer};
  return cupti_traced(CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister, "cuMemHostUnregister", &params,
                      [&] { return cuMemHostUnregister_untraced(pointer); });
}

}  // extern "C"
