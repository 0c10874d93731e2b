#include "call_sites.h"

#include <algorithm>
#include <map>
#include <utility>

namespace memtrace {
namespace {

using SiteKey = std::pair<int32_t, uint64_t>;  // (device, stack id)

std::map<SiteKey, std::vector<const LiveAllocation*>> by_site(const std::vector<LiveAllocation>& live) {
  std::map<SiteKey, std::vector<const LiveAllocation*>> sites;
  for (const LiveAllocation& a : live) sites[{a.device, a.stack_id}].push_back(&a);
  return sites;
}

template <typename T>
T lower_median(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

bool larger_first(const CallSite& a, const CallSite& b) {
  if (a.bytes != b.bytes) return a.bytes > b.bytes;
  if (a.device != b.device) return a.device < b.device;
  return a.stack_id < b.stack_id;
}

}  // namespace

std::vector<CallSite> group_by_call_site(const std::vector<LiveAllocation>& live) {
  std::vector<CallSite> result;
  for (const auto& [key, allocations] : by_site(live)) {
    CallSite site{key.first, key.second, 0, allocations.size()};
    for (const LiveAllocation* a : allocations) site.bytes += a->size_bytes;
    result.push_back(site);
  }
  sort_largest_first(result);
  return result;
}

void sort_largest_first(std::vector<CallSite>& sites) { std::sort(sites.begin(), sites.end(), larger_first); }

std::vector<LeakSite> find_leak_sites(const std::vector<LiveAllocation>& live_at_exit, int64_t exit_ns,
                                      const FirstAllocationTimes& first_allocation_ns) {
  std::vector<LeakSite> result;
  for (const auto& [key, allocations] : by_site(live_at_exit)) {
    LeakSite leak;
    leak.site = CallSite{key.first, key.second, 0, allocations.size()};
    std::vector<uint64_t> sizes;
    std::vector<int64_t> times;
    for (const LiveAllocation* a : allocations) {
      leak.site.bytes += a->size_bytes;
      sizes.push_back(a->size_bytes);
      times.push_back(a->time_ns);
    }
    std::sort(times.begin(), times.end());
    int64_t span_ns = times.back() - times.front();
    auto first = first_allocation_ns.find(key);
    int64_t window_ns = exit_ns - std::min(times.front(), first == first_allocation_ns.end() ? 0 : first->second);
    leak.growing = allocations.size() >= kMinGrowthAllocations && window_ns > 0 && 2 * span_ns >= window_ns;
    if (leak.growing) {
      leak.growth_count = allocations.size();
      leak.growth_bytes_per_step = lower_median(sizes);
      std::vector<int64_t> intervals;
      for (size_t i = 1; i < times.size(); ++i) intervals.push_back(times[i] - times[i - 1]);
      leak.median_interval_s = double(lower_median(intervals)) / 1e9;
    }
    result.push_back(leak);
  }
  std::sort(result.begin(), result.end(), [](const LeakSite& a, const LeakSite& b) {
    if (a.growing != b.growing) return a.growing;
    return larger_first(a.site, b.site);
  });
  return result;
}

}  // namespace memtrace
