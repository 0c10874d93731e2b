#include "samplers/nvml_processes.h"

namespace memtrace {

namespace {
constexpr unsigned long long kNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE

// Adds one NVML entry to `other`.
void add_entry(NvmlOtherProcess& other, unsigned long long used) {
  if (used == kNotAvailable) {
    other.used_known = false;
    other.used_bytes = 0;
  } else if (other.used_known) {
    other.used_bytes += used;
  }
}
}  // namespace

ProcessUsage split_process_usage(const NvmlProcessInfo* processes, unsigned count, unsigned pid) {
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

unsigned other_processes(const NvmlProcessInfo* processes, unsigned count, unsigned pid, NvmlOtherProcess* others) {
  unsigned n = 0;
  for (unsigned i = 0; i < count; i++) {
    const unsigned other_pid = processes[i].pid;
    if (other_pid == pid) continue;
    // Insertion by pid: at most kMaxNvmlProcesses entries, no allocation.
    unsigned at = 0;
    while (at < n && others[at].pid < other_pid) at++;
    if (at < n && others[at].pid == other_pid) {
      add_entry(others[at], processes[i].used_gpu_memory);
      continue;
    }
    for (unsigned j = n; j > at; j--) others[j] = others[j - 1];
    others[at] = NvmlOtherProcess{other_pid, true, 0};
    add_entry(others[at], processes[i].used_gpu_memory);
    n++;
  }
  return n;
}

}  // namespace memtrace
