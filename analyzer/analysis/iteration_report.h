// What the reports say per iteration (summary's iterations section, leaks' growth per iteration and its
// grouping under the user's line, the traps): the iterations (iterations.h) measured on the device with the
// highest peak allocated, each leak candidate's growth per iteration, the growing sites rolled up under the user's
// line they share, and the traps (traps.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/iterations.h"
#include "analysis/traps.h"
#include "read/nvtx_ranges.h"
#include "stacks/frames.h"

namespace memtrace {

// A call site that kept allocations from the iterations to the end of the last one (KeptAllocation).
struct GrowingSite {
  uint64_t stack_id = 0;    // the site's stack with the most kept bytes (SiteGrouping names the site)
  uint64_t kept_bytes = 0;  // all it kept
  // Median from the 2nd iteration of the bytes it allocated in each iteration and kept to the last one's end.
  uint64_t growth_per_iteration_bytes = 0;
};

// Growing sites under one line of the user's own code: the innermost frame of the user's code on the sites'
// stacks before library code starts (the line the user wrote that called into the libraries), or the
// innermost Python frame where no frame or every frame is the user's.
struct LeakGroup {
  std::string file;  // as recorded; reports show its basename
  std::string function;
  uint32_t line = 0;
  bool has_python = true;  // false: the sites have no Python frames (one group for them all)
  // The median from the 2nd iteration of what the group's sites together kept from each iteration.
  uint64_t growth_per_iteration_bytes = 0;
  std::vector<GrowingSite> sites;      // growth per iteration, largest first
  std::vector<std::string> libraries;  // Python packages below the user's line (site-packages/<name>), sorted
};

struct IterationReport {
  EventPhases phases;
  IterationFigures figures;
  // Per Analysis::leaks entry: the median from the 2nd iteration of the bytes that site allocated in each
  // iteration and kept to the end (live at exit); 0 for every entry where no iteration was found.
  std::vector<uint64_t> leak_growth_per_iteration_bytes;
  // The sites that kept allocations from most iterations (growth per iteration above 0) to the last one's end,
  // rolled up under the user's line; largest growth first.
  std::vector<LeakGroup> groups;
  std::vector<Trap> traps;
  bool found() const { return !phases.iterations.empty(); }
};

// Finds and measures the iterations of the analyzed trace (reads it twice more: collect_event_origins and
// measure_iterations). Throws TraceError where the file no longer reads.
IterationReport analyze_iterations(const Analysis& analysis, FrameResolver& resolver,
                                   const std::vector<NvtxRange>& nvtx = {});

}  // namespace memtrace
