// How our wrappers reach programs that never call an exported symbol by name (measured, see
// ../shared/notes/cuda-interception.md):
//  - Every copy of the CUDA runtime (shared libcudart, and the static copies inside nvcc binaries, CuPy,
//    cuBLAS, NCCL) imports no cu* symbol. It dlopen()s libcuda.so.1, dlsym()s cuGetProcAddress_v2 on that
//    handle, asks it for "cuGetProcAddress" itself, and makes every later lookup through what it got back.
//    Our dlsym hands out a wrapper of cuGetProcAddress; the wrapper hands out our hooks for memory functions.
//  - JAX/XLA dlopen()s libcuda and dlsym()s the VMM functions by name on that handle: dlsym on a specific
//    handle never finds a preloaded definition, so our dlsym substitutes them too.
#include <dlfcn.h>
#include <string.h>

#include "hooks_internal.h"

#define MEMTRACE_EXPORT __attribute__((visibility("default")))

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

// Helpers the wrappers use, never handed out.
std::atomic<void*> g_real_ctx_get_device{nullptr};
std::atomic<void*> g_real_mem_get_info{nullptr};
std::atomic<void*> g_real_pointer_get_attribute{nullptr};

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
  if (strcmp(base, "cuCtxGetDevice") == 0) remember(g_real_ctx_get_device, real);
  if (strcmp(base, "cuMemGetInfo") == 0 && version >= 3020) remember(g_real_mem_get_info, real);
  if (strcmp(base, "cuPointerGetAttribute") == 0) remember(g_real_pointer_get_attribute, real);
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  for (HookSlot& h : g_hooks) {
    if (!h.base_name || version < h.min_version || strcmp(h.base_name, base) != 0) continue;
    if (h.per_thread_stream != per_thread && has_per_thread_sibling(h)) continue;
    return install(h.real, real, h.handed_out);
  }
  return real;
}

void* driver_helper(std::atomic<void*>& slot, const char* symbol) {
  void* fn = slot.load(std::memory_order_acquire);
  if (fn) return fn;
  fn = real_dlsym(RTLD_NEXT, symbol);
  if (!fn) {
    void* handle = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (handle) {
      fn = real_dlsym(handle, symbol);
      dlclose(handle);
    }
  }
  if (fn) remember(slot, fn);
  return fn;
}

}  // namespace

void* real_dlsym(void* handle, const char* name) { return get_real_dlsym()(handle, name); }

void* substitute_by_symbol(const char* symbol, void* real) {
  if (strcmp(symbol, "cuGetProcAddress") == 0)
    return install(g_real_get_proc_v1, real, reinterpret_cast<void*>(&wrapped_get_proc_v1));
  if (strcmp(symbol, "cuGetProcAddress_v2") == 0)
    return install(g_real_get_proc_v2, real, reinterpret_cast<void*>(&wrapped_get_proc_v2));
  if (strcmp(symbol, "cuCtxGetDevice") == 0) remember(g_real_ctx_get_device, real);
  if (strcmp(symbol, "cuMemGetInfo_v2") == 0) remember(g_real_mem_get_info, real);
  if (strcmp(symbol, "cuPointerGetAttribute") == 0) remember(g_real_pointer_get_attribute, real);
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

int current_device() {
  using Fn = CUresult (*)(CUdevice*);
  auto fn = reinterpret_cast<Fn>(driver_helper(g_real_ctx_get_device, "cuCtxGetDevice"));
  CUdevice device = -1;
  if (!fn || fn(&device) != CUDA_SUCCESS) return -1;
  return device;
}

bool device_memory_info(uint64_t* free_bytes, uint64_t* total_bytes) {
  using Fn = CUresult (*)(size_t*, size_t*);
  auto fn = reinterpret_cast<Fn>(driver_helper(g_real_mem_get_info, "cuMemGetInfo_v2"));
  size_t f = 0, t = 0;
  if (!fn || fn(&f, &t) != CUDA_SUCCESS) return false;
  *free_bytes = f;
  *total_bytes = t;
  return true;
}

int device_of_pointer(uint64_t address, int fallback) {
  using Fn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  auto fn = reinterpret_cast<Fn>(driver_helper(g_real_pointer_get_attribute, "cuPointerGetAttribute"));
  int ordinal = -1;
  if (!fn || fn(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) != CUDA_SUCCESS) return fallback;
  return ordinal;
}

}  // namespace memtrace

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
    return fn ? memtrace::substitute_by_symbol(name, fn) : fn;
  }
  return real(handle, name);
}
