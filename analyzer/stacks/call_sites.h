// Grouping of live allocations by call site (device + the stack as reports show it) and the step-after-step
// growth measure used to rank leak candidates.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/memory_model.h"
#include "stacks/frame_key.h"
#include "stacks/stack_table.h"

namespace memtrace {

// Which call site each stack belongs to. A call site is a stack as the text reports show it: the native frames
// of the Python interpreter itself (StackTable::in_python_interpreter), which they hide unless --all-frames, do
// not tell two sites apart. One Python line reaches an allocation through different interpreter paths: CPython
// 3.13 runs a class's __init__ through slot_tp_init/type_call on the first call and through its specialized call
// path after, which gives two stacks that print alike and that a user would read as two places in their code.
// Every other frame (Python frames, native frames outside the interpreter: two C++ paths under one Python line
// stay two sites) and the stack's cut marks still separate sites, with one exception: on a stack whose native
// frames were cut (StackCuts), the native frames kept past its outermost Python frame (the process's or the
// thread's entry, libc's __libc_start_main...) do not count. The tracer keeps the innermost N native frames,
// interpreter frames included, so how many of those outer frames survive the cut depends on how many interpreter
// frames came before: the 3.13 stack through type_call keeps none where the specialized one keeps two. Stacks the
// table does not define (id 0, ids of a damaged trace) are each their own site.
// Stacks are told apart by their portable keys (site_key): the grouping of one trace is the one raw frame values
// would give, and the key of a site can be looked for in another trace of the same program.
class SiteGrouping {
 public:
  // Every stack its own site: for callers without the trace's stacks.
  SiteGrouping() = default;
  // `stacks` must outlive this and hold every Module and Stack record of the trace (the grouping of a stack
  // is computed once, on first use).
  explicit SiteGrouping(const StackTable& stacks) : stacks_(&stacks) {}

  // The site of `stack_id`, named by the first stack asked about among those that show the same frames: equal
  // ids for stacks that differ only in interpreter frames. One lookup per stack after the first call, so callers
  // group allocations by stack first and call this per stack, not per allocation.
  uint64_t site_of(uint64_t stack_id) const;

 private:
  const StackTable* stacks_ = nullptr;
  mutable std::unordered_map<uint64_t, uint64_t> site_by_stack_;
  // site_key -> site. Keys of one table: compared by pointer, in constant time per frame.
  mutable std::map<PortableSiteKey, uint64_t, SameTableLess> site_by_key_;
};

// The portable key of the call site of `stack_id` (SiteGrouping's rule: its frames, innermost first, without the
// interpreter's native frames, and without the native frames past the outermost Python frame where native frames
// were cut; its cut marks and its backward mark), or nullopt for a stack `stacks` does not define. The key points into
// `stacks`. O(frames x log modules); a stack holds at most kMaxNativeFramesPerStack + kMaxPythonFramesPerStack frames.
std::optional<PortableSiteKey> site_key(const StackTable& stacks, uint64_t stack_id);

struct CallSite {
  int32_t device = -1;
  // The stack whose frames the reports show for the site: of the stacks merged into it, the one with the most
  // live bytes (ties: the lowest id). Its interpreter frames are what --all-frames and --json show.
  uint64_t stack_id = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  // Stacks merged into the site (SiteGrouping): more than 1 only where stacks differed in interpreter frames.
  uint64_t stack_count = 1;
};

// Groups `live` by (device, site of its stack); largest bytes first, ties by device then stack id.
std::vector<CallSite> group_by_call_site(const std::vector<LiveAllocation>& live,
                                         const SiteGrouping& grouping = SiteGrouping{});
// Merges `per_stack` (one entry per (device, stack id), each of stack_count 1) into one entry per (device,
// site), and puts them in group_by_call_site's order.
void merge_call_sites(std::vector<CallSite>& per_stack, const SiteGrouping& grouping);
// Puts `sites` (one per (device, site)) in group_by_call_site's order.
void sort_largest_first(std::vector<CallSite>& sites);

struct LeakSite {
  CallSite site;
  // A site "grows step after step" when it has >= kMinGrowthAllocations allocations live at exit whose
  // allocation times span at least half of the time from the site's first allocation (freed ones
  // included) to the live-at-exit moment. Measured from the site's own start rather than from the
  // trace's, because start-up (CUDA context, kernel loading, model set-up) can take most of a short
  // traced run; a site that kept everything it allocated in one burst still spans almost nothing.
  // Decided per site as SiteGrouping makes them: the allocations of every stack merged into it together.
  bool growing = false;
  uint64_t growth_count = 0;           // allocations live at exit from this site
  uint64_t growth_bytes_per_step = 0;  // median of their sizes: what each repetition kept
  double median_interval_s = 0;        // median time between consecutive ones
};

inline constexpr uint64_t kMinGrowthAllocations = 3;

// First allocation time of each stack, keyed (device, stack id); see MemoryModel.
using FirstAllocationTimes = std::map<std::pair<int32_t, uint64_t>, int64_t>;

// Leak candidates from the allocations live at exit (at `exit_ns` from trace start): growing sites
// first (bytes desc), then the rest (bytes desc). A site starts at the earliest first allocation of its
// stacks; a stack missing from `first_allocation_ns` is taken to start at 0. Medians of an even count take
// the lower middle value, so that the bytes per step is a size that was really allocated.
std::vector<LeakSite> find_leak_sites(const std::vector<LiveAllocation>& live_at_exit, int64_t exit_ns,
                                      const FirstAllocationTimes& first_allocation_ns = {},
                                      const SiteGrouping& grouping = SiteGrouping{});

}  // namespace memtrace
