#include "attach/cupti_source.h"

#include <cuda.h>
#include <cupti.h>  // with generated_cuda_meta.h: the driver functions' params structs
#include <sched.h>

#include <atomic>
#include <cstdio>

#include "attach/cupti_loader.h"
#include "hooks/driver_events.h"
#include "hooks/resolver.h"
#include "record/recorder.h"
#include "samplers/pool_sampler.h"

namespace memtrace {
namespace {

// The driver functions whose callbacks are enabled: every memory function driver_hooks.cc records.
constexpr CUpti_CallbackId kMemoryCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
    CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuArray3DCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayDestroy,
    // The synchronizations at which a stream-ordered pool's reserved memory is sampled, as hooks/sync_hooks.cc
    // samples it in a preloaded tracer (PyTorch's cudaMallocAsync backend reports torch.cuda.memory_reserved()
    // from the same pool attribute).
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
};

CuptiApi g_api;
CUpti_SubscriberHandle g_subscriber = nullptr;
// Dekker-style handshake with cupti_source_stop (both sequentially consistent): a callback counts itself in,
// then looks at g_on; stop clears g_on, then waits for the count to reach 0. A callback that counted itself in
// after stop saw 0 finds g_on false and records nothing.
std::atomic<bool> g_on{false};
std::atomic<int> g_in_flight{0};

// A free whose record waits for API exit (the process is exiting: free_before_call) keeps its size in the
// call's correlationData, shared by its entry and exit callbacks: bit 63 says "deferred".
constexpr uint64_t kDeferredBit = uint64_t{1} << 63;

// A free: recorded at API entry, unless deferred to API exit. `device_pointer`: the address is device memory of
// the driver's, whose size and device the driver still knows at entry (the allocation may predate attach, so
// the reader may have no ALLOC to take them from).
[[gnu::always_inline]] inline void on_free_callback(const CUpti_CallbackData* data, MemoryEvent e,
                                                    bool device_pointer) {
  if (data->callbackSite == CUPTI_API_ENTER) {
    if (device_pointer && e.address != 0) {
      e.size = allocation_range_bytes(e.address);
      e.device = device_of_pointer(e.address, current_device());
    }
    bool deferred = free_before_call(e);
    if (data->correlationData) *data->correlationData = deferred ? kDeferredBit | e.size : 0;
    return;
  }
  if (!data->correlationData || !(*data->correlationData & kDeferredBit)) return;
  e.size = *data->correlationData & ~kDeferredBit;
  free_after_call(e, *static_cast<const CUresult*>(data->functionReturnValue));
}

MemoryEvent free_event(Api api, uint64_t address) { return {.layer = Layer::kDriver, .api = api, .address = address}; }

template <typename Params>
const Params& params(const CUpti_CallbackData* data) {
  return *static_cast<const Params*>(data->functionParams);
}

// The frees (either site).
[[gnu::always_inline]] inline bool dispatch_free(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      on_free_callback(d, free_event(Api::kCuMemFree, params<cuMemFree_v2_params>(d).dptr), true);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      // The two params structs have one layout (generated_cuda_meta.h).
      const auto& p = params<cuMemFreeAsync_params>(d);
      bool ptsz = cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz;
      on_free_callback(d, async_free(Api::kCuMemFreeAsync, p.dptr, stream_value(p.hStream), ptsz), true);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      on_free_callback(d, free_event(Api::kCuMemRelease, params<cuMemRelease_params>(d).handle), false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      on_free_callback(d, free_event(Api::kCuMemFreeHost, ptr_value(params<cuMemFreeHost_params>(d).p)), false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
      on_free_callback(d, free_event(Api::kCuMemHostUnregister, ptr_value(params<cuMemHostUnregister_params>(d).p)),
                       false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy:
      on_free_callback(d, free_event(Api::kCuArrayDestroy, ptr_value(params<cuArrayDestroy_params>(d).hArray)), false);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayDestroy:
      on_free_callback(d,
                       free_event(Api::kCuMipmappedArrayDestroy,
                                  ptr_value(params<cuMipmappedArrayDestroy_params>(d).hMipmappedArray)),
                       false);
      return true;
    default: return false;
  }
}

// The allocations and the VMM calls, at API exit with the call's result. Inlined into the callback, as the event
// helpers are (driver_events.h): the callback is then the one frame of ours above the recorder's, as a hook is.
[[gnu::always_inline]] inline void dispatch_exit(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  CUresult r = *static_cast<const CUresult*>(d->functionReturnValue);
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
      if (r == CUDA_SUCCESS && pools_seen()) sample_known_pools(Api::kCuCtxSynchronize);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
      if (r == CUDA_SUCCESS && pools_seen()) sample_known_pools(Api::kCuStreamSynchronize);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
      if (r == CUDA_SUCCESS && pools_seen()) sample_known_pools(Api::kCuEventSynchronize);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const auto& p = params<cuMemAlloc_v2_params>(d);
      driver_mem_alloc_done(r, p.dptr, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const auto& p = params<cuMemAllocPitch_v2_params>(d);
      driver_mem_alloc_pitch_done(r, p.dptr, p.pPitch, p.WidthInBytes, p.Height);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const auto& p = params<cuMemAllocManaged_params>(d);
      driver_mem_alloc_managed_done(r, p.dptr, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const auto& p = params<cuMemAllocAsync_params>(d);  // the _ptsz params have the same layout
      driver_mem_alloc_async_done(r, p.dptr, p.bytesize, p.hStream,
                                  cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const auto& p = params<cuMemAllocFromPoolAsync_params>(d);
      driver_mem_alloc_from_pool_done(r, p.dptr, p.bytesize, p.hStream,
                                      cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      const auto& p = params<cuMemCreate_params>(d);
      driver_mem_create_done(r, p.handle, p.size, p.prop);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto& p = params<cuMemMap_params>(d);
      driver_mem_map_done(r, p.ptr, p.size, p.handle);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const auto& p = params<cuMemUnmap_params>(d);
      driver_mem_unmap_done(r, p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const auto& p = params<cuMemAddressReserve_params>(d);
      driver_address_reserve_done(r, p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const auto& p = params<cuMemAddressFree_params>(d);
      driver_address_free_done(r, p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      const auto& p = params<cuMemAllocHost_v2_params>(d);
      driver_host_alloc_done(Api::kCuMemAllocHost, r, p.pp, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      const auto& p = params<cuMemHostAlloc_params>(d);
      driver_host_alloc_done(Api::kCuMemHostAlloc, r, p.pp, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
      const auto& p = params<cuMemHostRegister_v2_params>(d);
      driver_host_register_done(r, p.p, p.bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2: {
      const auto& p = params<cuArrayCreate_v2_params>(d);
      driver_array_create_done(r, p.pHandle, p.pAllocateArray);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuArray3DCreate_v2: {
      const auto& p = params<cuArray3DCreate_v2_params>(d);
      driver_array_3d_create_done(r, p.pHandle, p.pAllocateArray);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate: {
      const auto& p = params<cuMipmappedArrayCreate_params>(d);
      driver_mipmapped_array_create_done(r, p.pHandle, p.pMipmappedArrayDesc, p.numMipmapLevels);
      break;
    }
    default: break;
  }
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  g_in_flight.fetch_add(1);
  if (g_on.load() && domain == CUPTI_CB_DOMAIN_DRIVER_API && cbdata) {
    const auto* d = static_cast<const CUpti_CallbackData*>(cbdata);
    HookScope scope;
    if (scope.outermost() && !dispatch_free(cbid, d) && d->callbackSite == CUPTI_API_EXIT) dispatch_exit(cbid, d);
  }
  g_in_flight.fetch_sub(1);
}

const char* result_text(CUptiResult result) {
  const char* text = nullptr;
  if (g_api.result_string && g_api.result_string(result, &text) == CUPTI_SUCCESS && text) return text;
  return "unknown CUPTI error";
}

CUptiResult subscribe(char* other, size_t other_size) {
  if (g_api.subscribe_v2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "memtrace";
    params.oldSubscriberName = other;
    params.oldSubscriberSize = other_size;
    return g_api.subscribe_v2(&g_subscriber, on_callback, nullptr, &params);
  }
  return g_api.subscribe(&g_subscriber, on_callback, nullptr);
}

}  // namespace

CuptiStart cupti_source_start(char* why, size_t why_size) {
  if (g_subscriber) return CuptiStart::kOn;
  char path[512];
  if (!cupti_load(&g_api, path, sizeof path, why, why_size)) return CuptiStart::kUnavailable;
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUptiResult r = subscribe(other, sizeof other);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    g_subscriber = nullptr;
    snprintf(why, why_size, "CUPTI already has a subscriber (%s): driver layer off, PyTorch layer only",
             other[0] ? other : "Kineto, Nsight or another profiler");
    return CuptiStart::kBusy;
  }
  if (r != CUPTI_SUCCESS) {
    g_subscriber = nullptr;
    snprintf(why, why_size, "cuptiSubscribe (%s) failed: %s: driver layer off", path, result_text(r));
    return CuptiStart::kUnavailable;
  }
  g_on.store(true);
  for (CUpti_CallbackId cbid : kMemoryCallbacks) {
    r = g_api.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
    if (r != CUPTI_SUCCESS) {
      snprintf(why, why_size, "cuptiEnableCallback (%s) failed: %s: driver layer off", path, result_text(r));
      cupti_source_stop();
      return CuptiStart::kUnavailable;
    }
  }
  return CuptiStart::kOn;
}

void cupti_source_stop() {
  if (!g_subscriber) return;
  g_on.store(false);
  for (CUpti_CallbackId cbid : kMemoryCallbacks)
    g_api.enable_callback(0, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  g_api.unsubscribe(g_subscriber);
  g_subscriber = nullptr;
  while (g_in_flight.load() != 0) sched_yield();
}

}  // namespace memtrace
