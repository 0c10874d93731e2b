#include "hooks/hook_events.h"

#include <atomic>

#include "hooks/resolver.h"
#include "samplers/device_usage.h"
#include "samplers/pool_sampler.h"

namespace memtrace {
namespace {

// Where an allocation's memory lives decides whether the device's free/total at a failure says anything.
bool charged_to_device(Memory memory) {
  return memory == Memory::kDevice || memory == Memory::kArray || memory == Memory::kManaged;
}

// A fixed table (devices 0..63, as far as a trace tells them apart): a hook may not allocate. Relaxed: each
// slot is one value on its own, and a retain returns the same handle to every thread.
constexpr int kMaxPrimaryContexts = 64;
std::atomic<uint64_t> g_primary_contexts[kMaxPrimaryContexts];

bool primary_context_slot(int device) { return device >= 0 && device < kMaxPrimaryContexts; }

}  // namespace

void record_alloc(MemoryEvent e, bool ok, bool out_of_memory) {
  if (!ok && !out_of_memory) return;
  e.kind = ok ? EventKind::kAlloc : EventKind::kOom;
  if (!ok) {
    e.address = 0;
    if (charged_to_device(e.memory)) device_memory_info(&e.device_free_bytes, &e.device_total_bytes);
  }
  record_event(e);
  if (!ok && charged_to_device(e.memory))
    device_usage_after_oom(e.device, e.api, e.device_total_bytes != 0, e.device_free_bytes, e.device_total_bytes);
}

void record_context_alloc(MemoryEvent e, bool ok, bool out_of_memory) {
  if (ok) e.context = current_context();
  record_alloc(e, ok, out_of_memory);
}

void on_device_alloc(Api api, bool ok, bool out_of_memory, uint64_t address, uint64_t size, int result) {
  // No event is made for the dormant path: the live set needs only these three (a traced allocation pays one test).
  if (ok && note_device_alloc_if_dormant(api, address, size)) return;
  record_context_alloc({.layer = Layer::kDriver,
                        .api = api,
                        .device = current_device(),
                        .address = address,
                        .size = size,
                        .result = result},
                       ok, out_of_memory);
}

void on_other(EventKind kind, Api api, uint64_t address, uint64_t size, uint64_t handle) {
  record_event({.kind = kind, .layer = Layer::kDriver, .api = api, .address = address, .size = size, .handle = handle});
}

// Plain stream-ordered allocations come from the current device's pool and need no extra driver call.
int pool_block_device(bool ok, uint64_t address) {
  int current = current_device();
  return ok ? device_of_pointer(address, current) : current;
}

namespace {
// A block of the current pool of its stream's device: cuMemAllocAsync takes it from "the memory pool associated
// with the stream's device" (CUDA's reference), whichever device is current. A default stream (0, legacy,
// per-thread) is the current device's: one cuCtxGetDevice. A stream the program made may be another device's:
// the driver is asked whose the block is instead (one cuPointerGetAttribute), the current device if it cannot say
// (a graph node's address before the graph runs) or there is no block (a failed allocation).
int async_block_device(bool ok, uint64_t address, uint64_t stream) {
  const bool default_stream = stream == 0 || stream == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY) ||
                              stream == reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD);
  if (!ok || default_stream) return current_device();
  const int device = device_of_pointer(address, -1);
  return device >= 0 ? device : current_device();
}
}  // namespace

void record_async_alloc(MemoryEvent e, bool ok, bool out_of_memory, bool per_thread_stream) {
  e.kind = EventKind::kAlloc;
  if (ok) e.capture_id = stream_capture_id(e.stream, per_thread_stream);
  if (ok && trace_dormant() && note_in_live_set_if_dormant(e)) return;
  if (e.device == kDeviceUnresolved) e.device = async_block_device(ok, e.address, e.stream);
  record_alloc(e, ok, out_of_memory);
  // The pool may have grown to hold the block (a captured allocation is not memory until the graph runs).
  if (ok && e.capture_id == 0) sample_pool_after_alloc(e.api, e.device, e.address);
}

MemoryEvent async_free(const HookScope& scope, Api api, uint64_t address, uint64_t stream, bool per_thread_stream) {
  if (scope.outermost()) return async_free(api, address, stream, per_thread_stream);
  return {.layer = Layer::kBlock, .api = api, .stream = stream, .address = address};
}

MemoryEvent async_free(Api api, uint64_t address, uint64_t stream, bool per_thread_stream) {
  MemoryEvent e{.layer = Layer::kBlock, .api = api, .stream = stream, .address = address};
  if (address != 0) e.capture_id = stream_capture_id(stream, per_thread_stream);
  return e;
}

void record_import(Api api, uint64_t address) {
  int current = current_device();
  record_event({.kind = EventKind::kAlloc,
                .layer = Layer::kDriver,
                .api = api,
                .device = device_of_pointer(address, current),
                .address = address,
                .size = allocation_range_bytes(address),
                .memory = Memory::kImported});
}

void remember_primary_context(int device, uint64_t context) {
  if (primary_context_slot(device)) g_primary_contexts[device].store(context, std::memory_order_relaxed);
}

uint64_t primary_context(int device) {
  return primary_context_slot(device) ? g_primary_contexts[device].load(std::memory_order_relaxed) : 0;
}

void record_context_destroy(Api api, int device, uint64_t context) {
  if (device < 0) return;
  record_event({.kind = EventKind::kContextDestroy, .api = api, .device = device, .address = context});
}

void record_graph_captured(Api api, uint64_t stream, const void* graph_out, uint64_t capture_id) {
  if (capture_id == 0 || graph_out == nullptr) return;
  uint64_t graph = ptr_value(*static_cast<void* const*>(graph_out));
  record_event(
      {.kind = EventKind::kGraphCaptured, .api = api, .stream = stream, .graph = graph, .capture_id = capture_id});
}

void record_instantiate(Api api, uint64_t exec, uint64_t graph) {
  record_event({.kind = EventKind::kGraphInstantiate, .api = api, .address = exec, .graph = graph});
}

void record_launch(Api api, uint64_t exec, uint64_t stream) {
  record_event({.kind = EventKind::kGraphLaunch, .api = api, .stream = stream, .address = exec});
  // The launch may have grown the device's graph memory pool (its alloc nodes took memory): pool_sampler.h.
  sample_graph_pool(current_device(), api);
}

void record_alloc_node(Api api, uint64_t graph, int device, uint64_t address, uint64_t size) {
  record_event({.kind = EventKind::kAlloc,
                .layer = Layer::kBlock,
                .api = api,
                .device = device,
                .address = address,
                .size = size,
                .graph = graph});
}

void record_free_node(Api api, uint64_t graph, uint64_t address) {
  record_event({.kind = EventKind::kFree, .layer = Layer::kBlock, .api = api, .address = address, .graph = graph});
}

}  // namespace memtrace
