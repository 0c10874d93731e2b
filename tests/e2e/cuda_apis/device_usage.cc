// Device samples (DEVICE_USAGE): check_device_usage.py runs this with and without the fake NVML of
// tests/fakecuda/nvml.cc.
//   device_usage oom     8 MiB on device 0, 16 MiB on device 1, then 2 GiB on device 1 (more than the
//                        device's 1 GiB): an OOM. Ends with both allocations live.
//   device_usage wait    8 MiB on device 0, then waits until the tracer's writer thread has asked NVML for
//                        the device's memory (the fake NVML counts the calls), so that its periodic sample is in
//                        the trace.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstring>

#include "e2e_util.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void *small, *medium, *huge;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaMalloc(&small, 8 * kMiB));
  if (std::strcmp(argv[1], "wait") == 0) {
    void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOLOAD | RTLD_LAZY);
    auto calls = reinterpret_cast<unsigned (*)()>(nvml ? dlsym(nvml, "fakenvml_memory_info_calls") : nullptr);
    if (!calls) return 4;                                          // the tracer did not load NVML
    for (int i = 0; i < 2000 && calls() == 0; i++) usleep(10000);  // up to 20 s on a loaded machine
    return calls() > 0 ? 0 : 5;
  }
  E2E_OK(cudaSetDevice(1));
  E2E_OK(cudaMalloc(&medium, 16 * kMiB));
  E2E_FAILS_WITH(cudaErrorMemoryAllocation, cudaMalloc(&huge, 2048 * kMiB));
  return 0;
}
