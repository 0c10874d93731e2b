// Grouping of live allocations by call site (device + full stack) and the step-after-step growth
// measure used to rank leak candidates.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
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
// Puts `sites` (one per (device, stack id)) in group_by_call_site's order.
void sort_largest_first(std::vector<CallSite>& sites);

struct LeakSite {
  CallSite site;
  // A site "grows step after step" when it has >= kMinGrowthAllocations allocations live at exit whose
  // allocation times span at least half of the time from the site's first allocation (freed ones
  // included) to the live-at-exit moment. Measured from the site's own start rather than from the
  // trace's, because start-up (CUDA context, kernel loading, model set-up) can take most of a short
  // traced run; a site that kept everything it allocated in one burst still spans almost nothing.
  bool growing = false;
  uint64_t growth_count = 0;           // allocations live at exit from this site
  uint64_t growth_bytes_per_step = 0;  // median of their sizes: what each repetition kept
  double median_interval_s = 0;        // median time between consecutive ones
};

inline constexpr uint64_t kMinGrowthAllocations = 3;

// First allocation time of each call site, keyed (device, stack id); see MemoryModel.
using FirstAllocationTimes = std::map<std::pair<int32_t, uint64_t>, int64_t>;

// Leak candidates from the allocations live at exit (at `exit_ns` from trace start): growing sites
// first (bytes desc), then the rest (bytes desc). A site missing from `first_allocation_ns` is taken to
// start at 0. Medians of an even count take the lower middle value, so that the bytes per step is a
// size that was really allocated.
std::vector<LeakSite> find_leak_sites(const std::vector<LiveAllocation>& live_at_exit, int64_t exit_ns,
                                      const FirstAllocationTimes& first_allocation_ns = {});

}  // namespace memtrace
