// The fake libcupti.so.13: the callback API a profiler subscribes through (cupti_callbacks.h has the driver's
// side). One subscriber at a time, as in the real CUPTI; with FAKECUPTI_BUSY=1 another tool (Kineto, Nsight) is
// taken to hold it, and cuptiSubscribe answers CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.
#include <cstdlib>
#include <cstring>

#include "cupti_callbacks.h"

namespace {

constexpr const char kBusyName[] = "CUPTI for fake Kineto";

bool busy() {
  const char* value = getenv("FAKECUPTI_BUSY");
  return value && strcmp(value, "1") == 0;
}

struct CUpti_Subscriber_st {
  int unused;
} g_handle;

}  // namespace

extern "C" {

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  if (!subscriber || !callback) return CUPTI_ERROR_INVALID_PARAMETER;
  if (busy()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  CUptiResult result = fakecuda_cupti_subscribe(callback, userdata);
  if (result == CUPTI_SUCCESS) *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_handle);
  return result;
}

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                              CUpti_SubscriberParams* params) {
  if (params && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  CUptiResult result = cuptiSubscribe(subscriber, callback, userdata);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params && params->oldSubscriberName &&
      params->oldSubscriberSize > 0) {
    strncpy(params->oldSubscriberName, kBusyName, params->oldSubscriberSize - 1);
    params->oldSubscriberName[params->oldSubscriberSize - 1] = '\0';
  }
  return result;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  if (subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&g_handle)) return CUPTI_ERROR_INVALID_PARAMETER;
  fakecuda_cupti_unsubscribe();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) {
  if (subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&g_handle)) return CUPTI_ERROR_INVALID_PARAMETER;
  return fakecuda_cupti_enable(enable, domain, cbid);
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain) {
  if (subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&g_handle)) return CUPTI_ERROR_INVALID_PARAMETER;
  for (CUpti_CallbackId cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; cbid++) {
    CUptiResult result = fakecuda_cupti_enable(enable, domain, cbid);
    if (result != CUPTI_SUCCESS) return result;
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char** text) {
  if (!text) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS: *text = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *text = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *text = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    default: *text = "CUPTI_ERROR_UNKNOWN"; break;
  }
  return CUPTI_SUCCESS;
}

}  // extern "C"
