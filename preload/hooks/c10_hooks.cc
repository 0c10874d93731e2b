// PyTorch's allocator hooks (c10::reportMemoryUsageToProfiler, c10::reportOutOfMemoryToProfiler): the block
// layer of PyTorch's caching allocator. Exported by name (preload/CMakeLists.txt lists their mangled names);
// each records, then forwards to libc10.so's own.
#include <dlfcn.h>

#include <atomic>

#include "hooks/c10_hooks.h"
#include "hooks/export.h"
#include "hooks/hook_events.h"
#include "hooks/resolver.h"
#include "measure/phase_cycles.h"
#include "record/recorder.h"
#include "samplers/device_usage.h"

using namespace memtrace;

// ---- PyTorch's caching allocator ------------------------------------------------------------------------
// libc10_cuda.so calls c10::reportMemoryUsageToProfiler on every block allocation (+size) and free (-size)
// of the native caching allocator (default and expandable segments), with PyTorch's own allocated and
// reserved totals after the change, whether or not a profiler runs (c10/core/Allocator.cpp; measured on
// torch 2.11). Our definition is found first; we record, then forward to libc10.so's own so that
// torch.profiler still gets its memory events. libc10.so is loaded RTLD_LOCAL by Python, where
// dlsym(RTLD_NEXT) finds nothing: it is looked up on its own handle.
namespace c10 {
// The ABI of c10::Device (c10/core/Device.h): DeviceType (int8_t enum) and DeviceIndex (int8_t), passed by
// value in one register.
struct Device {
  int8_t type;
  int8_t index;
};
// c10::DeviceType::CUDA (c10/core/DeviceType.h). PyTorch's CPU allocators report through the same hook
// (shared-memory tensors of DataLoader workers do, profiling or not): host memory, never recorded, and no
// reason to start a trace in a process that never touches CUDA.
constexpr int8_t kCudaDeviceType = 1;

namespace {
// The real hook in libc10.so, looked up once (a miss is remembered too: no dlopen on every call).
template <typename Fn>
Fn real_c10(const char* symbol, std::atomic<void*>& cache) {
  static void* const kMissing = reinterpret_cast<void*>(&real_c10<Fn>);
  void* fn = cache.load(std::memory_order_acquire);
  if (fn == kMissing) return nullptr;
  if (!fn) {
    void* handle = dlopen("libc10.so", RTLD_NOLOAD | RTLD_LAZY);
    if (handle) {
      fn = real_dlsym(handle, symbol);
      dlclose(handle);
    }
    cache.store(fn ? fn : kMissing, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}
std::atomic<void*> g_real_report_usage{nullptr};
std::atomic<void*> g_real_report_oom{nullptr};
}  // namespace

MEMTRACE_EXPORT void reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size, size_t total_allocated,
                                                 size_t total_reserved, Device device) {
  MEMTRACE_PHASE(kEnter);
  {
    HookScope scope;
    if (scope.outermost() && alloc_size != 0 && device.type == kCudaDeviceType && !MEMTRACE_PHASE_SKIP_RECORD() &&
        !note_torch_block_if_dormant(ptr_value(ptr), alloc_size, device.index)) {
      record_event({.kind = alloc_size > 0 ? EventKind::kAlloc : EventKind::kFree,
                    .layer = Layer::kBlock,
                    .api = Api::kTorchAllocator,
                    .device = device.index,
                    .address = ptr_value(ptr),
                    .size = static_cast<uint64_t>(alloc_size > 0 ? alloc_size : -alloc_size),
                    .allocator_allocated_bytes = total_allocated,
                    .allocator_reserved_bytes = total_reserved});
    }
  }
  using Fn = void (*)(void*, int64_t, size_t, size_t, Device);
  if (Fn real = real_c10<Fn>(kC10ReportUsageSymbol, g_real_report_usage))
    real(ptr, alloc_size, total_allocated, total_reserved, device);
  MEMTRACE_PHASE(kForwarded);
}

MEMTRACE_EXPORT void reportOutOfMemoryToProfiler(int64_t alloc_size, size_t total_allocated, size_t total_reserved,
                                                 Device device) {
  {
    HookScope scope;
    if (scope.outermost() && device.type == kCudaDeviceType) {
      MemoryEvent e{.kind = EventKind::kOom,
                    .layer = Layer::kBlock,
                    .api = Api::kTorchAllocator,
                    .device = device.index,
                    .size = static_cast<uint64_t>(alloc_size),
                    .allocator_allocated_bytes = total_allocated,
                    .allocator_reserved_bytes = total_reserved};
      bool have_memory_info = device_memory_info(&e.device_free_bytes, &e.device_total_bytes);
      record_event(e);
      device_usage_after_oom(e.device, e.api, have_memory_info, e.device_free_bytes, e.device_total_bytes);
    }
  }
  using Fn = void (*)(int64_t, size_t, size_t, Device);
  if (Fn real = real_c10<Fn>(kC10ReportOomSymbol, g_real_report_oom))
    real(alloc_size, total_allocated, total_reserved, device);
}
}  // namespace c10

// Hidden aliases: the address of our own definitions, whichever library the exported names bind to in this
// process (libc10.so may be in the global scope ahead of us when the tracer was loaded into a running job).
extern "C" void memtrace_own_c10_report_usage(void*, int64_t, size_t, size_t, c10::Device)
    __attribute__((alias("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"), visibility("hidden")));
extern "C" void memtrace_own_c10_report_oom(int64_t, size_t, size_t, c10::Device)
    __attribute__((alias("_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE"), visibility("hidden")));

namespace memtrace {
void* c10_report_usage_hook() { return reinterpret_cast<void*>(&memtrace_own_c10_report_usage); }
void* c10_report_oom_hook() { return reinterpret_cast<void*>(&memtrace_own_c10_report_oom); }
}  // namespace memtrace
