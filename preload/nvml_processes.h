// NVML's list of the processes using a device, split into this process's use and everyone else's (see
// device_usage.h). Apart from the NVML calls so that it can be tested without a GPU.
#pragma once
#include <cstdint>

namespace memtrace {

// nvmlProcessInfo_v2_t, the element type of nvmlDeviceGetComputeRunningProcesses_v3 (nvml.h; 24 bytes).
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NVML_VALUE_NOT_AVAILABLE (all ones) where the driver cannot say
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(NvmlProcessInfo) == 24, "nvmlProcessInfo_v2_t layout");

// This process's and every other process's use of a device, from NVML's list of compute processes.
struct ProcessUsage {
  bool known;                         // false: our own entry's figure is not available
  uint64_t process_used_bytes;        // our pid's usedGpuMemory; 0 when the list does not have us
  uint64_t other_processes_used_bytes;  // the sum of the others' (entries without a figure count 0)
};
ProcessUsage split_process_usage(const NvmlProcessInfo* processes, unsigned count, unsigned pid);

}  // namespace memtrace
