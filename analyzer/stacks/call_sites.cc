#include "stacks/call_sites.h"

#include <algorithm>
#include <map>
#include <span>
#include <utility>

#include "util/checked_math.h"

namespace memtrace {
namespace {

using SiteKey = std::pair<int32_t, uint64_t>;  // (device, stack id) or (device, site)

// `live`'s allocations ordered by (device, stack id), for for_each_stack. A sort of pointers rather than a map
// of vectors: these walks run at every OOM over the whole live set, and a sort allocates once.
std::vector<const LiveAllocation*> by_stack(const std::vector<LiveAllocation>& live) {
  std::vector<const LiveAllocation*> sorted;
  sorted.reserve(live.size());
  for (const LiveAllocation& a : live) sorted.push_back(&a);
  std::sort(sorted.begin(), sorted.end(), [](const LiveAllocation* a, const LiveAllocation* b) {
    return std::pair(a->device, a->stack_id) < std::pair(b->device, b->stack_id);
  });
  return sorted;
}

// Calls visit(key, allocations) for each (device, stack id) of `sorted` (by_stack's), in key order.
template <typename Visit>
void for_each_stack(const std::vector<const LiveAllocation*>& sorted, Visit&& visit) {
  for (size_t begin = 0, end = 0; begin < sorted.size(); begin = end) {
    SiteKey key{sorted[begin]->device, sorted[begin]->stack_id};
    while (end < sorted.size() && sorted[end]->device == key.first && sorted[end]->stack_id == key.second) ++end;
    visit(key, std::span(sorted.data() + begin, end - begin));
  }
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

// A site under construction: its totals, and the bytes of the stack it shows (CallSite::stack_id).
struct SiteBuilder {
  CallSite site;
  uint64_t shown_stack_bytes = 0;
  bool empty = true;

  void add_stack(uint64_t stack_id, uint64_t bytes, uint64_t count) {
    if (empty || bytes > shown_stack_bytes || (bytes == shown_stack_bytes && stack_id < site.stack_id)) {
      site.stack_id = stack_id;
      shown_stack_bytes = bytes;
    }
    site.stack_count = empty ? 1 : site.stack_count + 1;
    site.bytes = saturating_add(site.bytes, bytes);
    site.count += count;
    empty = false;
  }
};

}  // namespace

std::optional<PortableSiteKey> site_key(const StackTable& stacks, uint64_t stack_id) {
  const std::vector<uint64_t>* frames = stacks.frames(stack_id);
  if (!frames) return std::nullopt;
  PortableSiteKey key;
  key.frames.reserve(frames->size());
  for (uint64_t frame : *frames)
    if ((frame & kPythonFrameBit) || !stacks.in_python_interpreter(frame))
      key.frames.push_back(stacks.portable_frame(frame));
  key.cuts = stacks.cuts(stack_id);
  key.python_frames_from_backward = stacks.python_frames_from_backward(stack_id);
  auto is_python = [](const PortableFrame& f) {
    return f.kind == PortableFrame::Kind::kPython || f.kind == PortableFrame::Kind::kPythonNotInTrace;
  };
  auto outermost_python = std::find_if(key.frames.rbegin(), key.frames.rend(), is_python);
  if (key.cuts.native_frames_cut && outermost_python != key.frames.rend())
    key.frames.erase(outermost_python.base(), key.frames.end());
  return key;
}

uint64_t SiteGrouping::site_of(uint64_t stack_id) const {
  if (!stacks_) return stack_id;
  if (auto known = site_by_stack_.find(stack_id); known != site_by_stack_.end()) return known->second;
  uint64_t site = stack_id;
  if (std::optional<PortableSiteKey> key = site_key(*stacks_, stack_id))
    site = site_by_key_.try_emplace(std::move(*key), stack_id).first->second;
  site_by_stack_.emplace(stack_id, site);
  return site;
}

std::vector<CallSite> group_by_call_site(const std::vector<LiveAllocation>& live, const SiteGrouping& grouping) {
  std::vector<CallSite> per_stack;
  for_each_stack(by_stack(live), [&](SiteKey key, std::span<const LiveAllocation* const> allocations) {
    CallSite site{key.first, key.second, 0, allocations.size()};
    for (const LiveAllocation* a : allocations) site.bytes = saturating_add(site.bytes, a->size_bytes);
    per_stack.push_back(site);
  });
  merge_call_sites(per_stack, grouping);
  return per_stack;
}

void merge_call_sites(std::vector<CallSite>& per_stack, const SiteGrouping& grouping) {
  std::map<SiteKey, SiteBuilder> sites;
  for (const CallSite& s : per_stack)
    sites[{s.device, grouping.site_of(s.stack_id)}].add_stack(s.stack_id, s.bytes, s.count);
  per_stack.clear();
  for (auto& [key, builder] : sites) {
    builder.site.device = key.first;
    per_stack.push_back(builder.site);
  }
  sort_largest_first(per_stack);
}

void sort_largest_first(std::vector<CallSite>& sites) { std::sort(sites.begin(), sites.end(), larger_first); }

std::vector<LeakSite> find_leak_sites(const std::vector<LiveAllocation>& live_at_exit, int64_t exit_ns,
                                      const FirstAllocationTimes& first_allocation_ns, const SiteGrouping& grouping) {
  struct SiteAllocations {
    SiteBuilder builder;
    std::vector<const LiveAllocation*> allocations;
    int64_t first_ns = 0;  // the earliest first allocation of its stacks
  };
  std::map<SiteKey, SiteAllocations> sites;
  for_each_stack(by_stack(live_at_exit), [&](SiteKey key, std::span<const LiveAllocation* const> allocations) {
    SiteAllocations& site = sites[{key.first, grouping.site_of(key.second)}];
    uint64_t bytes = 0;
    for (const LiveAllocation* a : allocations) bytes = saturating_add(bytes, a->size_bytes);
    auto first = first_allocation_ns.find(key);
    int64_t stack_first_ns = first == first_allocation_ns.end() ? 0 : first->second;
    site.first_ns = site.builder.empty ? stack_first_ns : std::min(site.first_ns, stack_first_ns);
    site.builder.add_stack(key.second, bytes, allocations.size());
    site.builder.site.device = key.first;
    site.allocations.insert(site.allocations.end(), allocations.begin(), allocations.end());
  });
  std::vector<LeakSite> result;
  for (auto& [key, site] : sites) {
    LeakSite leak;
    leak.site = site.builder.site;
    std::vector<uint64_t> sizes;
    std::vector<int64_t> times;
    for (const LiveAllocation* a : site.allocations) {
      sizes.push_back(a->size_bytes);
      times.push_back(a->time_ns);
    }
    std::sort(times.begin(), times.end());
    // Times from the file may lie anywhere in int64_t: differences saturate (a span of more than 292
    // years is not told from one of 292).
    int64_t span_ns = saturating_sub(times.back(), times.front());
    int64_t window_ns = saturating_sub(exit_ns, std::min(times.front(), site.first_ns));
    leak.growing =
        times.size() >= kMinGrowthAllocations && window_ns > 0 && saturating_mul(span_ns, int64_t{2}) >= window_ns;
    if (leak.growing) {
      leak.growth_count = times.size();
      leak.growth_bytes_per_step = lower_median(sizes);
      std::vector<int64_t> intervals;
      for (size_t i = 1; i < times.size(); ++i) intervals.push_back(saturating_sub(times[i], times[i - 1]));
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
