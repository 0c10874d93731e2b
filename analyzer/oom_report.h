// The facts of `memtrace oom`: for each failed allocation (after MemoryModel's folding of the driver
// failures under one PyTorch OOM), what the process and the device held at that moment. Gathered by one
// more replay of the trace that stops at each OOM; only the first kMaxOomsDetailed get these facts, so
// that a job retrying after thousands of OOMs costs no more than 100 snapshots of its live set.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis.h"
#include "call_sites.h"
#include "memory_model.h"

namespace memtrace {

inline constexpr size_t kMaxOomsDetailed = 100;
// Call sites listed per OOM (live ones, growing ones) unless the command line says otherwise (--top).
inline constexpr size_t kSitesPerOom = 5;

struct OomDetail {
  OomEvent oom;                 // request, device, cuMemGetInfo free/total at the failure, call site
  DeviceTotals totals;          // this process on oom.device just after the failure (MemoryModel totals)
  bool allocator_layer = false; // PyTorch's caching allocator reports on this device
  // The DEVICE_USAGE sample the tracer took right after this failure (usage_after_oom), else the latest
  // one of the device before it; absent when the trace has none (no NVML, or an older tracer).
  std::optional<DeviceUsage> usage;
  bool usage_after_oom = false;
  Fragmentation fragmentation;  // of oom.device at the failure
  // The allocations of the allocated kind live on oom.device at the failure, grouped by call site:
  // how many sites there were, and the largest (bytes desc, at most the report's sites per OOM).
  uint64_t live_site_count = 0;
  std::vector<CallSite> top_live_sites;
  // Sites of those live allocations that grew step after step up to the failure (find_leak_sites with
  // the failure as the "exit" moment): how many, and the largest (bytes desc, as many as above).
  uint64_t growing_site_count = 0;
  std::vector<LeakSite> growing_sites;

  // The device's total memory: cuMemGetInfo's from the OOM event, else the DEVICE_USAGE sample's; 0 when
  // neither says.
  uint64_t device_total_bytes() const;
};

struct OomReport {
  std::vector<OomDetail> detailed;  // the first kMaxOomsDetailed OOMs, in trace order
  uint64_t total = 0;               // every OOM of the trace, listed by the model or only counted
};

// Replays `analysis.path` once more (with the layer hints of the first pass) up to the last OOM that gets
// detail, listing at most `sites_per_oom` live and growing call sites per OOM. Throws TraceError if the
// file changed since the first pass and no longer reads.
OomReport build_oom_report(const Analysis& analysis, size_t sites_per_oom = kSitesPerOom);

}  // namespace memtrace
