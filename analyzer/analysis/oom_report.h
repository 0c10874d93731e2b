// The facts of `memtrace oom`: for each failed allocation (after MemoryModel's folding of the driver
// failures under one PyTorch OOM), what the process and the device held at that moment. Gathered by one
// more replay of the trace that stops at each OOM; only the first kMaxOomsDetailed get these facts, and
// their call sites (a walk of every live allocation per OOM) only while the walks stay within a budget
// proportional to the trace's events (OomSiteBudget), so that the report costs a small multiple of a pass.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/analysis.h"
#include "model/memory_model.h"
#include "stacks/call_sites.h"

namespace memtrace {

inline constexpr size_t kMaxOomsDetailed = 100;
// Call sites listed per OOM (live ones, growing ones) unless the command line says otherwise (--top).
inline constexpr size_t kSitesPerOom = 5;

// How many live allocations the call-site walks of all the detailed OOMs may visit together: `slack` plus
// `per_event` per event of the trace. Each OOM's walk visits every allocation live at the failure (about
// 1 us each), so 100 OOMs over a live set of 300,000 would cost 30 s against 1 s for the trace's pass; with
// the defaults the walks cost at most about 4 passes plus 1 s. The first OOM whose walk would take the
// total past the budget, and every OOM after it, get their other figures but no call sites. A real trace
// (thousands of live allocations, a few OOMs among many more events) stays far below it.
struct OomSiteBudget {
  static constexpr uint64_t kSlack = 1 << 20;
  static constexpr uint64_t kPerEvent = 4;
  uint64_t slack = kSlack;
  uint64_t per_event = kPerEvent;
};

// What the reports say of an OOM with call_sites_listed false.
inline constexpr const char* kSitesNotListedReason = "the trace's live set is too large to list at every failure";

struct OomDetail {
  OomEvent oom;                  // request, device, cuMemGetInfo free/total at the failure, call site
  DeviceTotals totals;           // this process on oom.device just after the failure (MemoryModel totals)
  bool allocator_layer = false;  // PyTorch's caching allocator reports on this device
  // The DEVICE_USAGE sample the tracer took right after this failure (usage_after_oom), else the latest
  // one of the device before it; absent when the trace has none (no NVML, or an older tracer).
  std::optional<DeviceUsage> usage;
  bool usage_after_oom = false;
  Fragmentation fragmentation;  // of oom.device at the failure
  // False where the call-site walks had used up their budget (OomSiteBudget) before this OOM: the four
  // fields below are then empty and say nothing.
  bool call_sites_listed = true;
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
  // The index in `detailed` of the first OOM without call sites (every later one has none either), or
  // detailed.size() where all have them.
  size_t first_without_call_sites() const;
};

// Replays `analysis.path` once more (with the layer hints of the first pass) up to the last OOM that gets
// detail, listing at most `sites_per_oom` live and growing call sites per OOM, within `budget` (whose events
// are those of analysis.model). Throws TraceError if the file changed since the first pass and no longer
// reads.
OomReport build_oom_report(const Analysis& analysis, size_t sites_per_oom = kSitesPerOom,
                           OomSiteBudget budget = OomSiteBudget{});

}  // namespace memtrace
