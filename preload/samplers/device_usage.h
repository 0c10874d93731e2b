// Samples of each device as a whole (DEVICE_USAGE events, see memtrace.proto): what no CUDA API reports
// (the context, the CUDA libraries' own workspaces, other processes) shows up only in what the driver says
// is used. Through NVML (libnvidia-ml.so.1, part of the NVIDIA driver, loaded with dlopen when the trace
// starts; absent or MEMTRACE_NVML=0 = skipped silently):
//   device_free_bytes / device_total_bytes  nvmlDeviceGetMemoryInfo
//   process_used_bytes                       this pid's usedGpuMemory in nvmlDeviceGetComputeRunningProcesses_v3
//                                            (an empty list: 0; a list of others without us, as in a container
//                                            whose pids are not the host's: both figures left out, see
//                                            nvml_processes.h)
//   other_processes_used_bytes               the sum of every other process's usedGpuMemory
//   NvmlProcesses record                     the other processes one by one (pid, usedGpuMemory), by pid,
//                                            written before the sample only when the list changed
// Taken by the writer thread (never a hook) every flush interval in which events were recorded and at the
// end, and by the allocating hook right after an OOM (with cuMemGetInfo's free/total, so that an OOM is
// described even without NVML).
//
// Measured on an H200 (driver 580, CUDA 13.0): NVML's total is the whole memory, 150,754,820,096 bytes, where
// cuMemGetInfo says 150,109,880,320, so an NVML sample and an OOM's cuMemGetInfo figures differ by that much;
// a process holding one 256 MiB cudaMalloc (pools and graph memory trimmed to 0) was listed with 813,694,976
// bytes, and with 543,162,368 once it was freed: its context and the CUDA libraries' own memory, about
// 518 MiB that no API reports.
//
// A CUDA device ordinal is matched to its NVML device by PCI bus id (cuDeviceGetPCIBusId ->
// nvmlDeviceGetHandleByPciBusId_v2): NVML numbers devices differently from CUDA when CUDA_VISIBLE_DEVICES
// or CUDA_DEVICE_ORDER changes the order. The bus id is read from the hook thread the first time a device is
// seen, so the writer thread never needs a CUDA context.
#pragma once
#include <cstdint>

#include "record/clients.h"
#include "record/schema.h"

namespace memtrace {

// device_usage_start, device_usage_note_device, device_usage_sample_all and device_usage_baseline, which the
// recorder calls, are declared in record/clients.h.

// Right after an OOM event on `device`: a DEVICE_USAGE with `api` (the OOM's), cuMemGetInfo's free/total
// bytes (`have_memory_info` false: none) and, when NVML is loaded, the per-process figures.
void device_usage_after_oom(int device, Api api, bool have_memory_info, uint64_t free_bytes, uint64_t total_bytes);

}  // namespace memtrace
