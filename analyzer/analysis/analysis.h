// The whole offline analysis of one trace: one pass replays every event (totals, peaks, OOMs, live at
// exit) and, when asked, takes what was live at each device's peak allocated as it goes by
// (peak_capture.h); a device whose peak it could not take cheaply is found by a second pass that stops
// at that peak. Neither keeps history: memory stays flat however long the trace is.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/device_facts.h"
#include "model/memory_model.h"
#include "read/nvtx_ranges.h"
#include "read/trace_reader.h"
#include "stacks/call_sites.h"
#include "stacks/stack_table.h"

namespace memtrace {

inline constexpr size_t kMaxDevicesKept = 1024;  // far more than a machine has: a bound for damaged or hostile files
inline constexpr size_t kMaxNvmlOtherPidsKept = 1024;

struct TraceInfo {
  std::optional<proto::TraceStart> start;  // with the process's rank and job where the tracer wrote them
  std::optional<proto::TraceEnd> end;
  std::vector<proto::Notice> notices;
  // The Device records (UUID, name, total memory of each ordinal), in file order, at most kMaxDevicesKept; a
  // later record of an ordinal replaces the earlier one. Empty for traces of tracers that did not write them.
  std::vector<proto::Device> devices;
  // Per device ordinal: the pids NVML listed on it besides this process (NvmlProcesses records), over the whole
  // trace, ascending, at most kMaxNvmlOtherPidsKept per device (the lowest kept) and kMaxDevicesKept devices.
  // What names the untraced processes on a GPU. Empty for traces without such records (no NVML, nobody else on
  // the device, older tracers).
  std::map<uint32_t, std::set<uint32_t>> nvml_other_pids;
  const proto::Device* device(uint32_t ordinal) const;
};

struct Analysis {
  std::string path;
  TraceReadSummary read;
  TraceInfo info;
  StackTable stacks;
  MemoryModel model;
  int64_t last_event_time_ns = 0;  // time of the last complete event read
  // Per device: the allocated-kind allocations live at its peak allocated, grouped by call site.
  std::map<int32_t, std::vector<CallSite>> live_at_peak;
  // Per device: its driver-layer allocations live at the same moment that never held a PyTorch block and are not
  // of the allocated kind, one entry per stack (not merged into call sites): the peak breakdown sorts them by the
  // layer that asked (peak_breakdown.h). Where the device has no block layer, none.
  std::map<int32_t, std::vector<CallSite>> outside_at_peak;
  // Per device: free space inside reserved memory at its peak allocated (same moment as live_at_peak)
  // and at the end of the trace.
  std::map<int32_t, Fragmentation> fragmentation_at_peak;
  std::map<int32_t, Fragmentation> final_fragmentation;
  std::vector<LeakSite> leaks;
  // The job's NVTX ranges in the order they opened (read/nvtx_ranges.h: NvtxRangeCollector's contract), taken in
  // the first pass; empty for a trace without RangeEvent records.
  std::vector<NvtxRange> nvtx_ranges;
  // Per device: its first allocation and its NVML samples (device_facts.h), taken in the first pass.
  std::map<int32_t, DeviceFacts> device_facts;

  bool allocator_layer_seen() const;
  // From the first CUDA call to the end record (or the last event).
  int64_t duration_ns() const { return model.now_ns(); }
  // The moment "live at exit" is taken: the first PYTHON_FINALIZING when there is one (so that a long
  // interpreter teardown does not make a step-after-step leak look short), else the end.
  int64_t leak_window_ns() const { return model.finalizing_time_ns().value_or(model.now_ns()); }
  // Wall-clock time of the last complete event read (the start record's CLOCK_REALTIME plus the
  // event's time), when the trace has a start record that gives it.
  std::optional<uint64_t> last_event_unix_ns() const;
};

// Throws TraceError (see read_trace) for a file that is not a readable trace.
std::unique_ptr<Analysis> analyze_trace(const std::string& path, bool with_live_at_peak);

// Fills live_at_peak, outside_at_peak and fragmentation_at_peak of `devices` by replaying the trace up to each one's
// peak allocated (ReplayMoment::of: the moment before the next event where the peak was reached at attach): what
// analyze_trace does for the devices whose peak its one pass did not capture (PeakCapture's budget).
void collect_live_at_peak(Analysis& analysis, const std::vector<int32_t>& devices, const SiteGrouping& grouping);

// TraceStart.Origin's name ("ATTACH_INJECTED"), or "ORIGIN_N" for a value this memtrace does not know.
std::string origin_name(proto::TraceStart::Origin origin);

// Whether the trace began at an attach to the running process or is a snapshot of it (its TraceStart's origin is
// not LAUNCH): what was live then has no stack. False without a start record.
bool began_at_attach(const Analysis& a);

// Seconds from trace start.
inline double seconds(int64_t ns) { return double(ns) / 1e9; }

}  // namespace memtrace
