// `memtrace diff BEFORE AFTER`: what moved between two traces of one program ("did my fix work?"). Two steps:
// gather_trace_figures() reads one analyzed trace into plain figures (per device its peak allocated, per call site
// its bytes live at that peak and its growth), and diff() compares two such figure sets. Call sites are matched
// across the traces by their portable keys (stacks/frame_key.h: modules by build id and offset, Python frames by
// source position), so that two runs loaded at other addresses, with other Python frame ids, still line up.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/iteration_report.h"
#include "analysis/peak_breakdown.h"
#include "stacks/frame_key.h"

namespace memtrace {

// One call site of one trace on one device.
struct SiteFigures {
  PortableSiteKey key;  // points into the trace's StackTable (it lives as long as the Analysis)
  int32_t device = -1;
  uint64_t stack_id = 0;     // the stack the reports show for the site (CallSite::stack_id), for rendering
  uint64_t stack_count = 1;  // stacks merged into the site (CallSite::stack_count)
  uint64_t peak_bytes = 0;   // live at the device's peak allocated (0 for a site that only grows)
  uint64_t peak_count = 0;   // allocations live there
  // Bytes the site keeps per iteration of the job, where the trace's iterations were found (TraceFigures says
  // whether they were measured; a site without a figure then kept nothing).
  std::optional<int64_t> growth_per_iteration_bytes;
  // Bytes kept per step of a site that grows step after step (LeakSite: a step is the interval between its
  // allocations, not an iteration), where the leak analysis found it growing.
  std::optional<uint64_t> growth_per_step_bytes;
};

// One device of one trace.
struct DeviceFigures {
  uint64_t peak_allocated_bytes = 0;
  int64_t peak_allocated_time_ns = 0;                 // from trace start
  std::optional<int64_t> growth_per_iteration_bytes;  // allocated bytes kept per iteration, where measured
  // The bytes at the peak allocated by category (parameters, gradients, ...), in the breakdown's order; empty
  // where the breakdown is not known.
  std::vector<std::pair<std::string, uint64_t>> category_bytes;
  std::string name;          // the Device record's name ("" where the trace has none)
  uint64_t total_bytes = 0;  // the device's memory (0 where unknown)
};

// Where a trace was cut off (the writer was killed): how far it reads, and its last complete event.
struct TruncatedRead {
  uint64_t complete_bytes = 0;  // file offset one past the last complete chunk
  uint64_t file_bytes = 0;
  int64_t last_event_time_ns = 0;  // from trace start
};

struct TraceFigures {
  std::optional<TruncatedRead> truncated;  // set where the trace is cut off: its figures stop there
  // The program traced, as the command line names it: the executable's file name, and for a Python interpreter
  // its script (or `-m` module) as given; "" where the trace has no command line.
  std::string program;
  std::map<int32_t, DeviceFigures> devices;  // devices with events, by ordinal
  uint64_t iterations = 0;                   // iterations of the job found (0: none)
  // Which growth figures the sites carry. Where a measure was taken, a site without a figure kept nothing (0).
  bool growth_per_iteration_measured = false;
  bool growth_per_step_measured = false;
  // At most one entry per (device, key) as gathered; diff() adds up repeats.
  std::vector<SiteFigures> sites;
};

// The figures of one analyzed trace (analyze_trace with live at peak). The keys point into `analysis.stacks`:
// keep `analysis` alive as long as the result. The sites: those live at each device's peak allocated, the growing
// sites of the leak analysis (with peak_bytes 0 where not live at the peak), and, where `iterations` found the
// job's iterations, the sites that kept allocations from them with their growth per iteration (the device
// measured gets the allocated growth per iteration). `breakdowns` (breakdowns_at_peaks, by device) gives each
// device's bytes at its peak by category; devices without one get none.
TraceFigures gather_trace_figures(const Analysis& analysis, const IterationReport& iterations = {},
                                  const std::map<int32_t, MomentBreakdown>& breakdowns = {});

// The growth measure both traces have, which the diff compares: per iteration where both found iterations, else
// per step (the leak analysis's), else none.
enum class GrowthMeasure : uint8_t { kNone, kPerIteration, kPerStep };
// "per iteration", "per step", "none".
const char* growth_measure_name(GrowthMeasure measure);

struct CategoryChange {
  std::string name;
  std::optional<uint64_t> before_bytes, after_bytes;  // unset where that trace's breakdown lacks the category
  // after - before; unset where a side is unset (a change from an unknown figure is not one)
  std::optional<int64_t> change_bytes;
};

struct DeviceChange {
  int32_t device = -1;
  std::optional<DeviceFigures> before, after;                // unset where the device has no events in that trace
  int64_t peak_allocated_change_bytes = 0;                   // after - before, an absent side counted as 0
  std::optional<int64_t> growth_per_iteration_change_bytes;  // where both traces measured it
  std::vector<CategoryChange> categories;                    // before's order, then categories only after has
  // Both traces name the device (or give its memory) and the names (or sizes) differ.
  bool other_gpu = false;
};

// One call site's side of the comparison (a site of one trace, repeats added up).
struct SiteSide {
  uint64_t stack_id = 0;
  uint64_t stack_count = 1;
  uint64_t peak_bytes = 0;
  uint64_t peak_count = 0;
  std::optional<int64_t> growth_bytes;  // in DiffResult::growth's measure; unset for kNone
};

struct SiteChange {
  int32_t device = -1;
  const PortableSiteKey* key = nullptr;        // before's key where the site is in BEFORE, else after's
  std::optional<SiteSide> before, after;       // unset: the site is new (no before) or gone (no after)
  int64_t peak_change_bytes = 0;               // after - before, an absent side counted as 0
  std::optional<int64_t> growth_change_bytes;  // in DiffResult::growth's measure; unset for kNone
  bool changed() const { return !before || !after || peak_change_bytes != 0 || growth_change_bytes.value_or(0) != 0; }
  // The site as the reports show it: AFTER's side where the site is in AFTER (shown_in_after), else BEFORE's; its
  // stack is one of that trace's.
  bool shown_in_after() const { return after.has_value(); }
  CallSite shown_site() const;
};

struct DiffResult {
  std::vector<DeviceChange> devices;  // by ordinal, the union of both traces' devices
  uint64_t iterations_before = 0, iterations_after = 0;
  GrowthMeasure growth = GrowthMeasure::kNone;
  // Every site of either trace: changed ones first, by absolute change in peak contribution, then absolute
  // change in growth (largest first), then device and key; then the unchanged ones, by device and key.
  std::vector<SiteChange> sites;
  size_t changed_sites = 0;  // the first changed_sites of `sites`
  size_t matched_sites = 0;  // sites found in both traces
  // False where both traces name their program (TraceFigures::program) and the names differ.
  bool same_program = true;
  std::string program_before, program_after;
  // False where a device of both traces is another GPU in each (DeviceChange::other_gpu).
  bool same_devices = true;
  size_t sites_before = 0, sites_after = 0;                        // entries of each trace's TraceFigures::sites
  std::optional<TruncatedRead> truncated_before, truncated_after;  // TraceFigures::truncated of each
};

// What a reader of the diff must know before trusting its figures, one line each.
struct DiffNote {
  // "truncated_before", "truncated_after" (that trace is cut off: what it lacks is missing, not gone),
  // "other_program" (the programs differ; with no call site in both where none matched), "no_common_site" (one
  // program, no call site in both), "other_gpu" (a device ordinal is another GPU in each).
  const char* kind = "";
  std::string text;  // the note in words, without "note: " (names as the traces give them: not terminal-safe)
};

// Compares `before` and `after`. The keys of the result point into the figures' StackTables: keep the analyses
// alive. O(sites x log sites x key length).
DiffResult diff(const TraceFigures& before, const TraceFigures& after);

// The notes on `diff`, in that order: the truncated traces first (their figures stop early), then the programs
// or the call sites, then each device that is another GPU.
std::vector<DiffNote> diff_notes(const DiffResult& diff);

}  // namespace memtrace
