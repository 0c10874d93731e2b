#include "samplers/nvml_processes.h"

namespace memtrace {

ProcessUsage split_process_usage(const NvmlProcessInfo* processes, unsigned count, unsigned pid) {
  constexpr unsigned long long kNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
  ProcessUsage usage{true, 0, 0};
  bool listed = false;
  for (unsigned i = 0; i < count; i++) {
    unsigned long long used = processes[i].used_gpu_memory;
    if (processes[i].pid == pid) {
      listed = true;
      // One entry per GPU or compute instance (MIG): a process may be listed more than once.
      if (used == kNotAvailable) usage.known = false;
      else usage.process_used_bytes += used;
    } else if (used != kNotAvailable) {
      usage.other_processes_used_bytes += used;
    }
  }
  if (count > 0 && !listed) return ProcessUsage{false, 0, 0};
  return usage;
}

}  // namespace memtrace
