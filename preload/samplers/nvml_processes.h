// NVML's list of the processes using a device, split into this process's use and everyone else's (see
// device_usage.h). Apart from the NVML calls so that it can be tested without a GPU.
#pragma once
#include <cstdint>

#include "record/nvml_list.h"

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
//
// An empty list means nobody uses the device: 0 and 0. A list of other processes without us means the pids
// do not match: NVML lists host pids, and a process in a container (its own PID namespace) has another pid
// (every process with a context on the device is listed, and a traced process has one), so one of the
// "others" is us. Then neither figure is known: counting ourselves as another process would blame it for
// our own memory.
struct ProcessUsage {
  bool known;                           // false: our figure is not available, or we are not in a non-empty list
  uint64_t process_used_bytes;          // our pid's usedGpuMemory (summed over our entries)
  uint64_t other_processes_used_bytes;  // the sum of the others' (entries without a figure count 0)
};
ProcessUsage split_process_usage(const NvmlProcessInfo* processes, unsigned count, unsigned pid);

// The processes of the list other than `pid`, one entry per pid (a process listed more than once, once per GPU or
// compute instance under MIG, has its figures summed; one entry without a figure makes its figure unknown), by
// ascending pid, into `others` (room for `count` entries). Returns how many. Sorted so that the same processes
// listed in another order are the same list (NVML's order is its own), which the recorder writes only when it
// changes.
unsigned other_processes(const NvmlProcessInfo* processes, unsigned count, unsigned pid, NvmlOtherProcess* others);

}  // namespace memtrace
