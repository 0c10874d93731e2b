// How our wrappers reach programs that never call an exported symbol by name (measured, see
// docs/cuda-interception.md):
//  - Every copy of the CUDA runtime (shared libcudart, and the static copies inside nvcc binaries, CuPy,
//    cuBLAS, NCCL) imports no cu* symbol. It dlopen()s libcuda.so.1, dlsym()s cuGetProcAddress_v2 on that
//    handle, asks it for "cuGetProcAddress" itself, and makes every later lookup through what it got back.
//    Our dlsym hands out a wrapper of cuGetProcAddress; the wrapper hands out our hooks for memory functions.
//  - JAX/XLA dlopen()s libcuda and dlsym()s the VMM functions by name on that handle: dlsym on a specific
//    handle never finds a preloaded definition, so our dlsym substitutes them too.
//  - A program linked with -lcuda that calls cuGetProcAddress itself binds the exported name, which no
//    dlsym sees: we export both ABIs' names too (below), and they wrap the driver's as the dlsym path does.
#include <dlfcn.h>
#include <string.h>

#include "hooks/export.h"
#include "hooks/resolver.h"
#include "record/clients.h"

namespace memtrace {
namespace {

using DlsymFn = void* (*)(void*, const char*);
std::atomic<DlsymFn> g_real_dlsym{nullptr};

DlsymFn load_real_dlsym() {
  // dlvsym is not interposed; ask for the current default version first, then the original one.
  DlsymFn fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!fn) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  g_real_dlsym.store(fn, std::memory_order_release);
  return fn;
}

inline DlsymFn get_real_dlsym() {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_acquire);
  return fn ? fn : load_real_dlsym();
}

// ---- cuGetProcAddress ------------------------------------------------------------------------------------
// Two ABIs share the name: 4 arguments below CUDA 12.0 (cuGetProcAddress), 5 from 12.0 (cuGetProcAddress_v2,
// which the 12+ runtime asks for as "cuGetProcAddress" at version 12000).
using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
std::atomic<void*> g_real_get_proc_v1{nullptr};
std::atomic<void*> g_real_get_proc_v2{nullptr};

// Driver functions the wrappers ask for facts (resolver.h), never handed out. Each is remembered
// when the runtime looks it up (base name, at a version whose ABI is this one; per-thread-stream flavours
// are left alone) or a program dlsym()s it by its exported name; otherwise found like a hook's real
// function. [min_version, below_version) is the cuGetProcAddress version range of this ABI.
struct DriverHelper {
  const char* base_name;
  int min_version;
  int below_version;
  const char* symbol;
  std::atomic<void*> real;
  // The loaded driver exports no `symbol` (an older driver): not looked up again on every call.
  std::atomic<bool> missing;
};
constexpr int kNoUpperVersion = 1 << 30;
DriverHelper g_helpers[kHelperCount] = {
    {"cuCtxGetDevice", 2000, 13000, "cuCtxGetDevice", {nullptr}, {false}},
    // CUDA 13.0 gave the name a second argument, the context asked about.
    {"cuCtxGetDevice", 13000, kNoUpperVersion, "cuCtxGetDevice_v2", {nullptr}, {false}},
    {"cuMemGetInfo", 3020, kNoUpperVersion, "cuMemGetInfo_v2", {nullptr}, {false}},
    {"cuPointerGetAttribute", 4000, kNoUpperVersion, "cuPointerGetAttribute", {nullptr}, {false}},
    {"cuArrayGetMemoryRequirements", 11060, kNoUpperVersion, "cuArrayGetMemoryRequirements", {nullptr}, {false}},
    {"cuMipmappedArrayGetMemoryRequirements",
     11060,
     kNoUpperVersion,
     "cuMipmappedArrayGetMemoryRequirements",
     {nullptr},
     {false}},
    {"cuMemGetAddressRange", 3020, kNoUpperVersion, "cuMemGetAddressRange_v2", {nullptr}, {false}},
    {"cuMemGetAllocationPropertiesFromHandle",
     10020,
     kNoUpperVersion,
     "cuMemGetAllocationPropertiesFromHandle",
     {nullptr},
     {false}},
    {"cuStreamGetCaptureInfo", 12030, kNoUpperVersion, "cuStreamGetCaptureInfo_v3", {nullptr}, {false}},
    {"cuCtxGetCurrent", 4000, kNoUpperVersion, "cuCtxGetCurrent", {nullptr}, {false}},
    {"cuMemPoolGetAttribute", 11020, kNoUpperVersion, "cuMemPoolGetAttribute", {nullptr}, {false}},
    {"cuDeviceGetMemPool", 11020, kNoUpperVersion, "cuDeviceGetMemPool", {nullptr}, {false}},
    {"cuDeviceGetGraphMemAttribute", 11040, kNoUpperVersion, "cuDeviceGetGraphMemAttribute", {nullptr}, {false}},
    {"cuDeviceGetPCIBusId", 4010, kNoUpperVersion, "cuDeviceGetPCIBusId", {nullptr}, {false}},
    {"cuDeviceGetUuid", 11040, kNoUpperVersion, "cuDeviceGetUuid_v2", {nullptr}, {false}},
    {"cuDeviceGetName", 2000, kNoUpperVersion, "cuDeviceGetName", {nullptr}, {false}},
    {"cuDeviceTotalMem", 3020, kNoUpperVersion, "cuDeviceTotalMem_v2", {nullptr}, {false}},
};
static_assert(sizeof g_helpers / sizeof g_helpers[0] == kHelperCount, "one g_helpers row per HelperId");

void* substitute_proc(const char* base, void* real, int version, cuuint64_t flags);

CUresult wrapped_get_proc_v1(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto real = reinterpret_cast<GetProcV1>(g_real_get_proc_v1.load(std::memory_order_acquire));
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = substitute_proc(symbol, *pfn, version, flags);
  return r;
}

CUresult wrapped_get_proc_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  auto real = reinterpret_cast<GetProcV2>(g_real_get_proc_v2.load(std::memory_order_acquire));
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = substitute_proc(symbol, *pfn, version, flags);
  return r;
}

// Remembers `real` as the function behind `slot` and returns `wrapper`; if the slot already forwards to a
// different function (two drivers in one process?), leaves this one alone rather than misroute it.
void* install(std::atomic<void*>& slot, void* real, void* wrapper) {
  void* expected = nullptr;
  if (slot.compare_exchange_strong(expected, real) || expected == real) return wrapper;
  return real;
}

void remember(std::atomic<void*>& slot, void* real) {
  void* expected = nullptr;
  slot.compare_exchange_strong(expected, real);
}

bool has_per_thread_sibling(const HookSlot& h) {
  for (const HookSlot& other : g_hooks)
    if (other.per_thread_stream && other.base_name && strcmp(other.base_name, h.base_name) == 0) return true;
  return false;
}

void* substitute_proc(const char* base, void* real, int version, cuuint64_t flags) {
  if (strcmp(base, "cuGetProcAddress") == 0)
    return version >= 12000 ? install(g_real_get_proc_v2, real, reinterpret_cast<void*>(&wrapped_get_proc_v2))
                            : install(g_real_get_proc_v1, real, reinterpret_cast<void*>(&wrapped_get_proc_v1));
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  if (!per_thread)
    for (DriverHelper& helper : g_helpers)
      if (version >= helper.min_version && version < helper.below_version && strcmp(helper.base_name, base) == 0)
        remember(helper.real, real);
  for (HookSlot& h : g_hooks) {
    if (!h.base_name || version < h.min_version || strcmp(h.base_name, base) != 0) continue;
    if (h.per_thread_stream != per_thread && has_per_thread_sibling(h)) continue;
    return install(h.real, real, h.handed_out);
  }
  return real;
}

}  // namespace

void* driver_helper(HelperId id) {
  std::atomic<void*>& slot = g_helpers[id].real;
  const char* symbol = g_helpers[id].symbol;
  void* fn = slot.load(std::memory_order_acquire);
  if (fn || g_helpers[id].missing.load(std::memory_order_relaxed)) return fn;
  fn = real_dlsym(RTLD_NEXT, symbol);
  if (!fn) {
    void* handle = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (handle) {
      fn = real_dlsym(handle, symbol);
      dlclose(handle);
      if (!fn) g_helpers[id].missing.store(true, std::memory_order_relaxed);
    }
  }
  if (fn) remember(slot, fn);
  return slot.load(std::memory_order_acquire);
}

void* real_dlsym(void* handle, const char* name) { return get_real_dlsym()(handle, name); }

bool is_own_function(const void* fn) {
  Dl_info mine{}, theirs{};
  return dladdr(reinterpret_cast<const void*>(&real_dlsym), &mine) && dladdr(fn, &theirs) &&
         mine.dli_fbase == theirs.dli_fbase;
}

void* substitute_by_symbol(const char* symbol, void* real) {
  if (strcmp(symbol, "cuGetProcAddress") == 0)
    return install(g_real_get_proc_v1, real, reinterpret_cast<void*>(&wrapped_get_proc_v1));
  if (strcmp(symbol, "cuGetProcAddress_v2") == 0)
    return install(g_real_get_proc_v2, real, reinterpret_cast<void*>(&wrapped_get_proc_v2));
  for (DriverHelper& helper : g_helpers)
    if (strcmp(helper.symbol, symbol) == 0) remember(helper.real, real);
  for (HookSlot& h : g_hooks)
    if (strcmp(h.symbol, symbol) == 0) return install(h.real, real, h.handed_out);
  return real;
}

void* hook_real(HookId id, HookPath path) {
  HookSlot& h = g_hooks[id];
  if (path == HookPath::kHandedOut)
    if (void* fn = h.real.load(std::memory_order_acquire)) return fn;
  void* fn = h.real_next.load(std::memory_order_acquire);
  if (fn) return fn;
  fn = real_dlsym(RTLD_NEXT, h.symbol);
  if (!fn) {
    void* handle = dlopen(h.base_name ? "libcuda.so.1" : "libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
    if (handle) {
      fn = real_dlsym(handle, h.symbol);
      dlclose(handle);
    }
  }
  if (fn) remember(h.real_next, fn);
  return h.real_next.load(std::memory_order_acquire);
}

template <typename Fn>
Fn helper_fn(HelperId id) {
  return reinterpret_cast<Fn>(driver_helper(id));
}

int current_device() {
  auto fn = helper_fn<CUresult (*)(CUdevice*)>(kCtxGetDevice);
  CUdevice device = -1;
  if (!fn || fn(&device) != CUDA_SUCCESS) return -1;
  return device;
}

bool device_memory_info(uint64_t* free_bytes, uint64_t* total_bytes) {
  auto fn = helper_fn<CUresult (*)(size_t*, size_t*)>(kMemGetInfo);
  size_t f = 0, t = 0;
  if (!fn || fn(&f, &t) != CUDA_SUCCESS) return false;
  *free_bytes = f;
  *total_bytes = t;
  return true;
}

int device_of_pointer(uint64_t address, int fallback) {
  auto fn = helper_fn<CUresult (*)(void*, CUpointer_attribute, CUdeviceptr)>(kPointerGetAttribute);
  int ordinal = -1;
  if (!fn || fn(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) != CUDA_SUCCESS) return fallback;
  return ordinal;
}

bool device_and_context_of_pointer(uint64_t address, int32_t* device, uint64_t* context) {
  auto fn = helper_fn<CUresult (*)(void*, CUpointer_attribute, CUdeviceptr)>(kPointerGetAttribute);
  int ordinal = -1;
  if (!fn || fn(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) != CUDA_SUCCESS) return false;
  CUcontext made_in = nullptr;
  if (fn(&made_in, CU_POINTER_ATTRIBUTE_CONTEXT, address) != CUDA_SUCCESS) made_in = nullptr;
  *device = ordinal;
  *context = reinterpret_cast<uintptr_t>(made_in);
  return true;
}

uint64_t current_context() {
  auto fn = helper_fn<CUresult (*)(CUcontext*)>(kCtxGetCurrent);
  CUcontext context = nullptr;
  if (!fn || fn(&context) != CUDA_SUCCESS) return 0;
  return reinterpret_cast<uintptr_t>(context);
}

int device_of_context(CUcontext context) {
  if (auto fn = helper_fn<CUresult (*)(CUdevice*, CUcontext)>(kCtxGetDeviceOfContext)) {
    CUdevice device = -1;
    return fn(&device, context) == CUDA_SUCCESS ? device : -1;
  }
  auto get_current = helper_fn<CUresult (*)(CUcontext*)>(kCtxGetCurrent);
  CUcontext current = nullptr;
  if (!get_current || get_current(&current) != CUDA_SUCCESS || current != context) return -1;
  return current_device();
}

uint64_t array_bytes(CUarray array, int device) {
  using Fn = CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUarray, CUdevice);
  auto fn = helper_fn<Fn>(kArrayGetMemoryRequirements);
  CUDA_ARRAY_MEMORY_REQUIREMENTS requirements{};
  if (!fn || fn(&requirements, array, device) != CUDA_SUCCESS) return 0;
  return requirements.size;
}

uint64_t mipmapped_array_bytes(CUmipmappedArray array, int device) {
  using Fn = CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUmipmappedArray, CUdevice);
  auto fn = helper_fn<Fn>(kMipmappedArrayGetMemoryRequirements);
  CUDA_ARRAY_MEMORY_REQUIREMENTS requirements{};
  if (!fn || fn(&requirements, array, device) != CUDA_SUCCESS) return 0;
  return requirements.size;
}

uint64_t allocation_range_bytes(uint64_t address) {
  auto fn = helper_fn<CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>(kMemGetAddressRange);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!fn || fn(&base, &size, address) != CUDA_SUCCESS) return 0;
  return size;
}

int device_of_handle(uint64_t handle) {
  using Fn = CUresult (*)(CUmemAllocationProp*, CUmemGenericAllocationHandle);
  auto fn = helper_fn<Fn>(kMemGetAllocationPropertiesFromHandle);
  CUmemAllocationProp prop{};
  if (!fn || fn(&prop, handle) != CUDA_SUCCESS || prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE) return -1;
  return prop.location.id;
}

uint64_t stream_capture_id(uint64_t stream, bool per_thread_stream) {
  using Fn = CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*, const CUgraphNode**,
                          const CUgraphEdgeData**, size_t*);
  auto fn = helper_fn<Fn>(kStreamGetCaptureInfo);
  if (!fn) return 0;
  CUstream handle = reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream));
  if (per_thread_stream && stream == 0) handle = CU_STREAM_PER_THREAD;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  if (fn(handle, &status, &id, nullptr, nullptr, nullptr, nullptr) != CUDA_SUCCESS) return 0;
  return status == CU_STREAM_CAPTURE_STATUS_ACTIVE ? id : 0;
}

}  // namespace memtrace

// ---- cuGetProcAddress called by name (a program linked with -lcuda) ----------------------------------------
// cuda.h maps the name to cuGetProcAddress_v2 (5 arguments); the plain name is the pre-12.0 ABI (4 arguments),
// which the driver still exports.
#undef cuGetProcAddress
namespace memtrace {
namespace {
// The driver's definition of `symbol` (the next one after ours, else libcuda.so.1's if it is loaded), wrapped
// as a dlsym of it would be; nullptr when there is none. Remembered in `cache` after the first call.
void* wrapped_driver_get_proc(const char* symbol, std::atomic<void*>& cache) {
  void* fn = cache.load(std::memory_order_acquire);
  if (fn) return fn;
  void* real = real_dlsym(RTLD_NEXT, symbol);
  if (!real) {
    void* handle = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (handle) {
      real = real_dlsym(handle, symbol);
      dlclose(handle);
    }
  }
  if (!real) return nullptr;
  fn = substitute_by_symbol(symbol, real);
  cache.store(fn, std::memory_order_release);
  return fn;
}
std::atomic<void*> g_exported_get_proc_v1{nullptr};
std::atomic<void*> g_exported_get_proc_v2{nullptr};
}  // namespace
}  // namespace memtrace

extern "C" {
MEMTRACE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto fn = reinterpret_cast<memtrace::GetProcV1>(
      memtrace::wrapped_driver_get_proc("cuGetProcAddress", memtrace::g_exported_get_proc_v1));
  return fn ? fn(symbol, pfn, version, flags) : CUDA_ERROR_NOT_INITIALIZED;
}

MEMTRACE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* status) {
  auto fn = reinterpret_cast<memtrace::GetProcV2>(
      memtrace::wrapped_driver_get_proc("cuGetProcAddress_v2", memtrace::g_exported_get_proc_v2));
  return fn ? fn(symbol, pfn, version, flags, status) : CUDA_ERROR_NOT_INITIALIZED;
}
}  // extern "C"

// Interposed dlsym. Only lookups on a specific handle of a CUDA name are looked at; everything else,
// RTLD_NEXT above all, goes straight to glibc as a tail call, so that glibc resolves RTLD_NEXT relative to
// the caller's return address, not ours.
MEMTRACE_EXPORT void* dlsym(void* handle, const char* name) noexcept {
  auto real = memtrace::get_real_dlsym();
  // glibc declares `name` nonnull, so the compiler would drop a plain null check; callers do pass null.
  const char* checked = name;
  asm("" : "+r"(checked));
  if (handle != RTLD_DEFAULT && handle != RTLD_NEXT && checked && checked[0] == 'c' && checked[1] == 'u') {
    void* fn = real(handle, name);
    // A handle whose scope holds the preloaded objects (dlopen(NULL), as ctypes.CDLL(None) does) finds our
    // own exports first: they already wrap, and remembering one as the driver's function would keep the
    // driver's own from ever being remembered (install() leaves a slot that forwards elsewhere alone).
    return fn && !memtrace::is_own_function(fn) ? memtrace::substitute_by_symbol(name, fn) : fn;
  }
  return real(handle, name);
}
