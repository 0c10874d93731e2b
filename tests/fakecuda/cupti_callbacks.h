// The fake driver's side of the fake CUPTI (libcupti.so.13, fake_cupti.cc): one subscriber, callbacks enabled per
// driver callback id, and the memory functions of driver_memory.cc, driver_vmm.cc and driver_host.cc calling it at
// API_ENTER and API_EXIT with a CUpti_CallbackData and the params struct of the real layout
// (generated_cuda_meta.h), on the calling thread, as the real CUPTI does. Not a public interface.
#pragma once
#include <cupti.h>

#include <cstdint>

namespace fakecuda {

// True when a subscriber has `cbid` of the driver domain enabled.
bool cupti_enabled(CUpti_CallbackId cbid);

// Calls the subscriber for one site of a driver call (when it has `cbid` enabled then).
void cupti_call(CUpti_CallbackId cbid, const char* name, const void* params, CUpti_ApiCallbackSite site,
                CUresult* result, uint64_t* correlation);

// Runs `call` (a driver function's body) between its API_ENTER and API_EXIT callbacks.
template <typename Call>
CUresult cupti_traced(CUpti_CallbackId cbid, const char* name, const void* params, Call call) {
  uint64_t correlation = 0;  // shared by the two sites of one call, as CUpti_CallbackData.correlationData
  CUresult result = CUDA_SUCCESS;
  cupti_call(cbid, name, params, CUPTI_API_ENTER, &result, &correlation);
  result = call();
  cupti_call(cbid, name, params, CUPTI_API_EXIT, &result, &correlation);
  return result;
}

}  // namespace fakecuda

// The fake libcupti.so.13's way in (exported by libcuda.so.1 under fakecuda_*).
extern "C" {
// CUPTI_SUCCESS, or CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED when there is a subscriber already.
CUptiResult fakecuda_cupti_subscribe(CUpti_CallbackFunc callback, void* userdata);
void fakecuda_cupti_unsubscribe();
CUptiResult fakecuda_cupti_enable(uint32_t enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
// Callbacks made since the process started (a test proves none come after unsubscribe).
uint64_t fakecuda_cupti_callbacks();
}
