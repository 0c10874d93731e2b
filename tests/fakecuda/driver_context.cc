// Initialization, devices and contexts of the fake driver: just enough state to know the calling
// thread's current device, as the memory functions and a tracer asking cuCtxGetDevice need.
#include <atomic>
#include <mutex>
#include <set>

#include "device_memory.h"
#include "driver_internal.h"

namespace fakecuda {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<bool> g_initialized{false};
CUctx_st g_primary_contexts[kMaxDevices];
CUmemPoolHandle_st g_default_pools[kMaxDevices];
thread_local CUcontext t_current = nullptr;

// The streams cuStreamCreate made and cuStreamDestroy has not destroyed.
struct Streams {
  std::mutex lock;
  std::set<CUstream> live;
};
Streams& streams() {
  static Streams* s = new Streams;  // never destroyed: streams may be used from atexit handlers
  return *s;
}

}  // namespace

CUcontext stream_context(CUstream stream) {
  Streams& s = streams();
  std::lock_guard<std::mutex> guard(s.lock);
  return s.live.count(stream) ? stream->context : t_current;
}

bool driver_initialized() { return g_initialized.load(); }

CUcontext primary_context(int device) {
  g_primary_contexts[device].device = device;
  return &g_primary_contexts[device];
}

CUmemoryPool default_pool(int device) {
  g_default_pools[device].device = device;
  return &g_default_pools[device];
}

CUcontext current_context() { return t_current; }

CUresult current_device(int* device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  *device = t_current->device;
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (device_count() > kMaxDevices) return CUDA_ERROR_INVALID_DEVICE;
  if (!g_initialized.exchange(true)) teardown_register_at_init();
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;  // the headers this double is built with (13000)
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!context) return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  *context = primary_context(device);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  t_current = context;  // nullptr unbinds, as in the real driver
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!context) return CUDA_ERROR_INVALID_VALUE;
  *context = t_current;
  return CUDA_SUCCESS;
}

// CUDA 13.0's form: the device of `context` (null: of the current context).
CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext context) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!context) context = t_current;
  if (!context) return CUDA_ERROR_INVALID_CONTEXT;
  *device = context->device;
  return CUDA_SUCCESS;
}

// A context of its own on `device`, made current on the calling thread (params and flags are ignored).
CUresult cuCtxCreate_v4(CUcontext* context, CUctxCreateParams*, unsigned int, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!context) return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  *context = new CUctx_st{device};  // never deleted: a destroyed handle stays an address nobody reuses
  t_current = *context;
  return CUDA_SUCCESS;
}

// Frees what the real driver frees with a context (device_memory.h: freed_with_context). The primary
// context cannot be destroyed this way.
CUresult cuCtxDestroy_v2(CUcontext context) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!context) return CUDA_ERROR_INVALID_VALUE;
  if (context == primary_context(context->device)) return CUDA_ERROR_INVALID_CONTEXT;
  memory_free_context(context);
  if (t_current == context) t_current = nullptr;
  return CUDA_SUCCESS;
}

// Destroys the primary context's allocations; the context itself stays usable (the driver makes it
// again at the next use, which the double need not tell apart).
CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  memory_free_context(primary_context(device));
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice device) { return cuDevicePrimaryCtxReset_v2(device); }

// A stream of the current context (flags are ignored: every operation of the double completes at once).
CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!stream) return CUDA_ERROR_INVALID_VALUE;
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  *stream = new CUstream_st{t_current};
  Streams& s = streams();
  std::lock_guard<std::mutex> guard(s.lock);
  s.live.insert(*stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Streams& s = streams();
  std::lock_guard<std::mutex> guard(s.lock);
  if (!s.live.erase(stream)) return CUDA_ERROR_INVALID_HANDLE;
  delete stream;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return device_valid(device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  int current = 0;
  CUresult result = current_device(&current);
  if (result == CUDA_SUCCESS) *device = current;
  return result;
}

// Free and total bytes of the current context's device.
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  int device = 0;
  CUresult result = current_device(&device);
  if (result != CUDA_SUCCESS) return result;
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  *free_bytes = device_free_bytes(device);
  *total_bytes = device_total_bytes();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  if (!driver_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(device)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = default_pool(device);
  return CUDA_SUCCESS;
}

}  // extern "C"
