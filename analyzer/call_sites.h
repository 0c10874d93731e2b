// Grouping of live allocations by call site (device + full stack) and the step-after-step growth
// measure used to rank leak candidates.
#pragma once

#include <cstdint>
#include <vector>

#include "memory_model.h"

namespace memtrace {

struct CallSite {
  int32_t device = -1;
  uint64_t stack_id = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

// Groups `live` by (device, stack id); largest bytes first, ties by device then stack id.
std::vector<CallSite> group_by_call_site(const std::vector<LiveAllocation>& live);

struct LeakSite {
  CallSite site;
  // A site "grows step after step" when it has >= kMinGrowthAllocations allocations live at exit whose
  // allocation times span at least half of the trace's duration (up to the live-at-exit moment).
  bool growing = false;
  uint64_t growth_count = 0;           // allocations live at exit from this site
  uint64_t growth_bytes_per_step = 0;  // median of their sizes: what each repetition kept
  double median_interval_s = 0;        // median time between consecutive ones
};

inline constexpr uint64_t kMinGrowthAllocations = 3;

// Leak candidates from the allocations live at exit: growing sites first (bytes desc), then the rest
// (bytes desc). Medians of an even count take the lower middle value, so that the bytes per step is
// a size that was really allocated.
std::vector<LeakSite> find_leak_sites(const std::vector<LiveAllocation>& live_at_exit, int64_t trace_duration_ns);

}  // namespace memtrace
