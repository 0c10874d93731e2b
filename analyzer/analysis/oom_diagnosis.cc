#include "analysis/oom_diagnosis.h"

#include "util/format.h"

namespace memtrace {
namespace {

// part * 100 / whole without overflow, rounded down; 0 for an unknown whole.
uint64_t percent_of(uint64_t part, uint64_t whole) {
  if (whole == 0) return 0;
  return uint64_t((unsigned __int128)part * 100 / whole);
}

bool at_least_percent(uint64_t part, uint64_t whole, uint64_t percent) {
  return whole > 0 && (unsigned __int128)part * 100 >= (unsigned __int128)whole * percent;
}

// Free memory at the failure: the OOM event's cuMemGetInfo, else the DEVICE_USAGE sample's.
uint64_t device_free_bytes(const OomDetail& d) {
  if (d.oom.device_total_bytes) return d.oom.device_free_bytes;
  return d.usage ? d.usage->device_free_bytes : 0;
}

std::optional<OomDiagnosis> request_exceeds_device(const OomDetail& d) {
  uint64_t total = d.device_total_bytes();
  if (total == 0 || d.oom.requested_bytes <= total) return std::nullopt;
  return OomDiagnosis{OomCause::kRequestExceedsDevice,
                      "the request alone is larger than the device: " + short_bytes(d.oom.requested_bytes) +
                          " requested, the device has " + short_bytes(total) + " in all"};
}

std::optional<OomDiagnosis> other_processes(const OomDetail& d) {
  if (!d.usage || !d.usage->other_processes_used_bytes) return std::nullopt;
  uint64_t others = *d.usage->other_processes_used_bytes;
  uint64_t total = d.device_total_bytes();
  uint64_t own = d.totals.driver_bytes;
  bool large = others > own || at_least_percent(others, total, kOtherProcessesDevicePercent);
  if (others == 0 || d.oom.requested_bytes <= device_free_bytes(d) || !large) return std::nullopt;
  std::string text = "another process holds the memory: other processes use " + short_bytes(others);
  if (total) text += " of the device's " + short_bytes(total) + " (" + std::to_string(percent_of(others, total)) + "%)";
  text += std::string(others > own ? ", more than this process's " : ", this process holds ") + short_bytes(own) +
          " from CUDA; " + short_bytes(d.oom.requested_bytes) + " requested, " + short_bytes(device_free_bytes(d)) +
          " free";
  return OomDiagnosis{OomCause::kOtherProcesses, text};
}

std::optional<OomDiagnosis> live_tensors(const OomDetail& d) {
  uint64_t total = d.device_total_bytes();
  uint64_t allocated = d.totals.allocated_bytes;
  if (!at_least_percent(allocated, total, kLiveTensorsDevicePercent)) return std::nullopt;
  return OomDiagnosis{OomCause::kLiveTensors,
                      std::string(d.allocator_layer ? "live tensors fill the card: "
                                                    : "live allocations fill the card: ") +
                          short_bytes(allocated) + " allocated of the device's " + short_bytes(total) + " (" +
                          std::to_string(percent_of(allocated, total)) + "%); the call sites holding the most " +
                          "are listed under \"live at the failure\""};
}

std::optional<OomDiagnosis> fragmentation(const OomDetail& d) {
  const Fragmentation& f = d.fragmentation;
  uint64_t request = d.oom.requested_bytes;
  if (request == 0 || f.reserved_minus_allocated_bytes < request) return std::nullopt;
  if (f.segments_known && f.largest_free_block_bytes >= request) return std::nullopt;
  std::string text = "fragmentation: " + short_bytes(f.reserved_minus_allocated_bytes) + " reserved but unallocated, ";
  if (f.segments_known)
    text += "largest free block " + short_bytes(f.largest_free_block_bytes) + " < the " + short_bytes(request) +
            " requested";
  else
    text += "at least the " + short_bytes(request) + " requested, yet the allocator could not use it (its layout " +
            "of free blocks is not in the trace)";
  if (d.allocator_layer)
    text +=
        "; as PyTorch's own message says, setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids "
        "fragmentation";
  return OomDiagnosis{OomCause::kFragmentation, text};
}

std::optional<OomDiagnosis> growth(const OomDetail& d) {
  if (d.growing_site_count == 0) return std::nullopt;
  std::string text =
      "memory climbed step after step before the failure: " + count_of(d.growing_site_count, "call site") +
      " kept allocating";
  if (!d.growing_sites.empty()) {
    const LeakSite& top = d.growing_sites.front();
    text += "; the largest holds " + short_bytes(top.site.bytes) + " in " + count_of(top.growth_count, "allocation") +
            " of " + short_bytes(top.growth_bytes_per_step) + " per step, one every " +
            format_interval(top.median_interval_s) + " (median)";
  }
  return OomDiagnosis{OomCause::kGrowth, text};
}

}  // namespace

const char* oom_cause_name(OomCause cause) {
  switch (cause) {
    case OomCause::kRequestExceedsDevice: return "request_exceeds_device";
    case OomCause::kOtherProcesses: return "other_processes";
    case OomCause::kLiveTensors: return "live_tensors";
    case OomCause::kFragmentation: return "fragmentation";
    case OomCause::kGrowth: return "growth";
  }
  return "unknown";
}

std::string short_bytes(uint64_t bytes) {
  std::string text = format_bytes(bytes);
  return text.substr(0, text.find(" ("));
}

std::vector<OomDiagnosis> diagnose_oom(const OomDetail& detail) {
  std::vector<OomDiagnosis> result;
  // A request larger than the whole device fails whatever else holds memory: freeing anything would not
  // help, so no other cause is named beside it.
  if (auto diagnosis = request_exceeds_device(detail)) {
    result.push_back(std::move(*diagnosis));
    return result;
  }
  for (auto check : {other_processes, live_tensors, fragmentation, growth})
    if (auto diagnosis = check(detail)) result.push_back(std::move(*diagnosis));
  return result;
}

}  // namespace memtrace
