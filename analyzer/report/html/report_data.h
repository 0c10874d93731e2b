// The data of `memtrace report TRACE -o report.html`: one JSON object that the report's page (web/report.js)
// draws, laid out as docs/report.md says (the contract between this layer and the page). It holds, per device,
// the timeline of the allocated, reserved and driver totals downsampled at several resolutions (the lowest and
// the highest value of each total in every bin, so that no peak is lost; exact where the trace has few changes),
// the DEVICE_USAGE samples, the peaks, the live bytes of the top call sites at the end of each coarse bin and at
// the peak allocated (exactly), the flame graph and the breakdown at the peak allocated; and for the job its
// iterations and phases, NVTX ranges, OOMs with their diagnosis, leak candidates (one row per call site) with
// their growth per iteration, traps and the trace's health. Call sites are labelled as docs/report.md says, no two
// alike.
//
// Cost: the first-pass Analysis (with live at peak) is given; this reads the trace again for the iterations
// (analysis/iteration_report.h: two passes), the breakdown at the peaks, the OOMs (where there are some) and two
// passes of its own (the timeline and the call sites' totals; then the bytes of the top sites per bin). Every
// pass streams: memory follows the live allocations, the distinct stacks and the bins, plus what the iteration
// analysis keeps per event (12 bytes). The data's size is bounded by the bins and the caps below, not by the
// events: a few MB for any trace of one device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "stacks/frames.h"
#include "stacks/symbolizer.h"

namespace memtrace {

struct ReportDataOptions {
  // Bins of each binned timeline level, coarsest first (at least one). A device's finest level is exact (one
  // point per change) instead where the device has no more changes than the finest level has bins. Where more
  // than kDevicesAtFullResolution devices have a timeline, every level gets proportionally fewer bins (at least
  // kMinLevelBins) and each device fewer top sites (at least 1), so that a trace naming hundreds of devices
  // cannot make the data grow with them.
  std::vector<uint64_t> level_bins = {2000, 50000};
  size_t max_sites = 40;            // call sites with a series of live bytes, per device
  size_t max_usage_points = 20000;  // points per DEVICE_USAGE series, per device
  size_t max_nvtx_ranges = 10000;   // the first ranges opened
  size_t max_leaks = 50;            // leak candidates, in the leaks report's order
  size_t max_iterations = 20000;    // iteration spans (the first ones)
  size_t max_phase_spans = 80000;   // phase spans over all the iterations listed
  size_t max_ooms = 10000;          // OOMs listed (the model lists at most as many)
  // Flame graph nodes whose bytes are less than this fraction of the root's are merged, per parent, into one
  // "[N smaller stacks]" node: the picture cannot show them, and a live set of many sites stays a small tree.
  double flame_min_fraction = 1e-4;
};

inline constexpr size_t kDevicesAtFullResolution = 8;
inline constexpr uint64_t kMinLevelBins = 16;

// The report's data for `analysis` (analyze_trace with live at peak), its stacks resolved through `resolver`;
// `symbolizer` (the resolver's, or nullptr) names the modules it could not open in the health lines. Every
// integer is clamped to [-(2^53 - 1), 2^53 - 1] (JavaScript's exact integers): only a hostile trace has larger
// ones. Throws TraceError where the trace no longer reads (it changed since the first pass).
nlohmann::json report_data(const Analysis& analysis, FrameResolver& resolver, const Symbolizer* symbolizer,
                           const ReportDataOptions& options = {});

// `data` as JSON text that can sit inside an HTML <script> element: compact, UTF-8 (invalid UTF-8 replaced by
// U+FFFD), and every '<' written as the escape \u003c, so that no string of the trace ("</script>", "<!--")
// can end the element or change how the HTML parser reads it. JSON.parse reads it back unchanged.
std::string embeddable_json(const nlohmann::json& data);

}  // namespace memtrace
