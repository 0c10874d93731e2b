// Finding and loading libcupti for a tracer loaded into a running process (injected_sources.h): there is no
// link-time dependency on CUPTI, so the library is dlopen()ed at attach and its entry points looked up by name.
// Only the callback API is used (cupti_callbacks.h): subscribe, enable per callback id, unsubscribe.
#pragma once
#include <cupti.h>

#include <cstddef>

namespace memtrace {

// The CUPTI entry points the driver-layer source calls. subscribe_v2 (CUDA 12.x+) is null where the library
// lacks it; the others are always set once cupti_load succeeded.
struct CuptiApi {
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiSubscribe_v2) subscribe_v2 = nullptr;
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) enable_callback = nullptr;
  decltype(&::cuptiGetResultString) result_string = nullptr;
};

// Finds libcupti and loads it (RTLD_NOW | RTLD_LOCAL; never unloaded), in this order:
//   1. already loaded: libcupti.so.13, libcupti.so.12, libcupti.so (RTLD_NOLOAD);
//   2. beside a loaded libcudart.so* or libcuda.so* (dl_iterate_phdr), and from there the pip wheels' layout
//      (DIR/../../cuda_cupti/lib) and the toolkit's (DIR/../extras/CUPTI/lib64);
//   3. by name on the process's library search path;
//   4. $CUDA_HOME/extras/CUPTI/lib64, $CUDA_HOME/lib64, $CUDA_HOME/lib, then the same under /usr/local/cuda.
// Fills `api` and writes the path it loaded into `path` (`path_size` bytes, may be 0). False with `why` (one
// line) when no libcupti was found or it lacks an entry point. From the control thread only.
bool cupti_load(CuptiApi* api, char* path, size_t path_size, char* why, size_t why_size);

}  // namespace memtrace
