// The fake driver's CUPTI callbacks (cupti_callbacks.h).
#include <atomic>
#include <mutex>

#include "cupti_callbacks.h"

namespace {

// Driver callback ids are below CUPTI_DRIVER_TRACE_CBID_SIZE; one flag each.
constexpr unsigned kMaxCallbackIds = 1024;
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kMaxCallbackIds, "room for every driver callback id");

struct Subscriber {
  std::mutex lock;  // subscribe / unsubscribe
  std::atomic<CUpti_CallbackFunc> callback{nullptr};
  std::atomic<void*> userdata{nullptr};
  std::atomic<bool> enabled[kMaxCallbackIds] = {};
  std::atomic<uint64_t> calls{0};
};

Subscriber& subscriber() {
  static Subscriber* s = new Subscriber();
  return *s;
}

}  // namespace

namespace fakecuda {

bool cupti_enabled(CUpti_CallbackId cbid) {
  Subscriber& s = subscriber();
  return cbid < kMaxCallbackIds && s.callback.load() != nullptr && s.enabled[cbid].load();
}

void cupti_call(CUpti_CallbackId cbid, const char* name, const void* params, CUpti_ApiCallbackSite site,
                CUresult* result, uint64_t* correlation) {
  if (!cupti_enabled(cbid)) return;
  Subscriber& s = subscriber();
  CUpti_CallbackFunc callback = s.callback.load();
  if (!callback) return;
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = name;
  data.functionParams = params;
  data.functionReturnValue = result;
  data.correlationData = correlation;
  s.calls.fetch_add(1);
  callback(s.userdata.load(), CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
}

}  // namespace fakecuda

extern "C" {

CUptiResult fakecuda_cupti_subscribe(CUpti_CallbackFunc callback, void* userdata) {
  Subscriber& s = subscriber();
  std::lock_guard<std::mutex> guard(s.lock);
  if (s.callback.load()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  for (auto& flag : s.enabled) flag.store(false);
  s.userdata.store(userdata);
  s.callback.store(callback);
  return CUPTI_SUCCESS;
}

void fakecuda_cupti_unsubscribe() {
  Subscriber& s = subscriber();
  std::lock_guard<std::mutex> guard(s.lock);
  s.callback.store(nullptr);
  for (auto& flag : s.enabled) flag.store(false);
}

CUptiResult fakecuda_cupti_enable(uint32_t enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  Subscriber& s = subscriber();
  if (!s.callback.load()) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= kMaxCallbackIds) return CUPTI_ERROR_INVALID_PARAMETER;
  s.enabled[cbid].store(enable != 0);
  return CUPTI_SUCCESS;
}

uint64_t fakecuda_cupti_callbacks() { return subscriber().calls.load(); }

}  // extern "C"
