// The triage of one failed allocation, in plain words with its numbers. Causes are tried in the usual
// order of an OOM investigation, most certain first; every one that applies is reported, except that a
// request larger than the device is reported alone (nothing freed would have let it succeed):
//   request_exceeds_device  the request alone is larger than the device's total memory.
//   other_processes         NVML says other processes hold memory (DEVICE_USAGE), the request was larger
//                           than the free memory, and the others hold more than this process's driver
//                           total or at least kOtherProcessesDevicePercent of the device.
//   live_tensors            this process's allocated total (live tensors / blocks; driver memory where
//                           there is no allocator layer) is at least kLiveTensorsDevicePercent of the
//                           device: the program really holds that much.
//   fragmentation           reserved minus allocated is at least the request, yet the largest free block
//                           inside the allocator's reserved memory is smaller (or, where the segment
//                           layout is not in the trace, the allocator did not use that memory).
//   growth                  call sites whose live allocations grew step after step up to the failure.
#pragma once

#include <string>
#include <vector>

#include "analysis/oom_report.h"

namespace memtrace {

// Other processes count as the cause from a quarter of the device on: a share no usual CUDA context
// (a few hundred MiB) reaches, so it is someone's data.
inline constexpr uint64_t kOtherProcessesDevicePercent = 25;
// Live allocations "fill the card" from 80% of it on: the rest is typically context, the allocator's
// cache and other processes.
inline constexpr uint64_t kLiveTensorsDevicePercent = 80;

enum class OomCause { kRequestExceedsDevice, kOtherProcesses, kLiveTensors, kFragmentation, kGrowth };

// The stable --json name of a cause ("request_exceeds_device", "other_processes", "live_tensors",
// "fragmentation", "growth").
const char* oom_cause_name(OomCause cause);

struct OomDiagnosis {
  OomCause cause;
  std::string text;  // one sentence with the figures that made it apply
};

// The causes that apply to `detail`, in the order above. Empty when none does.
std::vector<OomDiagnosis> diagnose_oom(const OomDetail& detail);

// "24.00 MiB", "512 B": format_bytes without the exact byte count, for sentences.
std::string short_bytes(uint64_t bytes);

}  // namespace memtrace
