#include "analysis/analysis.h"

#include <algorithm>
#include <iterator>

#include "analysis/peak_capture.h"
#include "model/replay.h"

namespace memtrace {
namespace {

constexpr size_t kMaxNoticesKept = 100;

// Keeps `device` in info.devices, in place of an earlier record of its ordinal.
void keep_device(const proto::Device& device, TraceInfo& info, StackTable& stacks) {
  auto same = std::find_if(info.devices.begin(), info.devices.end(),
                           [&](const proto::Device& d) { return d.ordinal() == device.ordinal(); });
  if (same == info.devices.end()) {
    if (info.devices.size() >= kMaxDevicesKept) return;
    same = info.devices.insert(same, device);
  } else {
    *same = device;
  }
  stacks.bound(&*same);
}

// Adds the pids of `list` to info.nvml_other_pids (TraceInfo's bounds: the lowest pids kept). A set: a damaged or
// hostile file's long lists cost a logarithm per pid.
void keep_nvml_other_pids(const proto::NvmlProcesses& list, TraceInfo& info) {
  auto device = info.nvml_other_pids.find(list.device());
  if (device == info.nvml_other_pids.end()) {
    if (list.processes().empty() || info.nvml_other_pids.size() >= kMaxDevicesKept) return;
    device = info.nvml_other_pids.emplace(list.device(), std::set<uint32_t>{}).first;
  }
  std::set<uint32_t>& pids = device->second;
  for (const proto::NvmlProcess& process : list.processes()) {
    if (pids.size() >= kMaxNvmlOtherPidsKept && process.pid() > *pids.rbegin()) continue;
    pids.insert(process.pid());
    if (pids.size() > kMaxNvmlOtherPidsKept) pids.erase(std::prev(pids.end()));  // a lower pid displaced the highest
  }
}

// Replays every record into `analysis` (and `peaks`, with kCapturePeaks). What depends on whether an
// event follows a TraceEnd (the time of the last event, the TraceEnd kept) is settled at each TraceEnd
// and after the last record instead of at every event: the same result, a few instructions per event
// fewer.
template <bool kCapturePeaks>
class ReplaySink {
 public:
  // The memory model and the peak capture read an Event's allocator_reserved_bytes, never its allocated total
  // (the model keeps its own): the reader need not derive it (trace_reader.h).
  static constexpr bool kReadsAllocatorAllocatedBytes = false;

  ReplaySink(Analysis& analysis, PeakCapture* peaks) : analysis_(analysis), model_(analysis.model), peaks_(peaks) {}

  void on_event(const EventFields& event) {
    if constexpr (kCapturePeaks) peaks_->before_event(event);
    model_.apply(event);
    if constexpr (kCapturePeaks) peaks_->after_event();
    device_facts_.on_event(event, model_.now_ns());
  }
  void on_record(const proto::Record& record) {
    switch (record.kind_case()) {
      case proto::Record::kStart:
        analysis_.info.start = record.start();
        analysis_.stacks.bound(&*analysis_.info.start);  // strings past what the tracer writes, cut
        break;
      case proto::Record::kEnd:
        settle_events_since_end();
        analysis_.info.end = record.end();
        analysis_.model.apply_end(record.end());
        break;
      case proto::Record::kNotice:
        // The tracer writes each notice once; a damaged or hostile file is not allowed to grow the list.
        if (analysis_.info.notices.size() < kMaxNoticesKept) {
          analysis_.info.notices.push_back(record.notice());
          analysis_.stacks.bound(&analysis_.info.notices.back());
        }
        break;
      case proto::Record::kDevice: keep_device(record.device(), analysis_.info, analysis_.stacks); break;
      case proto::Record::kNvmlProcesses: keep_nvml_other_pids(record.nvml_processes(), analysis_.info); break;
      case proto::Record::kLiveAtAttach:
      case proto::Record::kAttachBaseline:
        model_.apply_attach_record(record);
        if constexpr (kCapturePeaks) peaks_->after_attach_record();
        break;
      case proto::Record::kRangeName:
      case proto::Record::kRangeEvent: nvtx_.on_record(record, model_.next_event_index()); break;
      default: analysis_.stacks.add(record); break;
    }
  }
  // Call before each TraceEnd is applied and after the last record. When events came since the last
  // TraceEnd (or the start), the model's time is that of the last of them, and the process survived
  // the TraceEnd before them (a recovered signal): it no longer ends the trace.
  void settle_events_since_end() {
    uint64_t events = analysis_.model.next_event_index();
    if (events == events_at_last_end_) return;
    analysis_.info.end.reset();
    analysis_.last_event_time_ns = analysis_.model.now_ns();
    events_at_last_end_ = events;
  }
  // After the last record.
  void finish_nvtx_ranges() { analysis_.nvtx_ranges = nvtx_.finish(model_.next_event_index()); }
  void finish_device_facts() { analysis_.device_facts = device_facts_.take(); }

 private:
  Analysis& analysis_;
  MemoryModel& model_;  // analysis_.model, one load away for every event instead of two instructions
  PeakCapture* peaks_;
  NvtxRangeCollector nvtx_;
  DeviceFactsCollector device_facts_;
  uint64_t events_at_last_end_ = 0;
};

template <bool kCapturePeaks>
void replay_records(Analysis& analysis, PeakCapture* peaks) {
  ReplaySink<kCapturePeaks> sink(analysis, peaks);
  analysis.read = read_trace(analysis.path, sink);
  sink.settle_events_since_end();
  sink.finish_nvtx_ranges();
  sink.finish_device_facts();
}

// Reads the whole trace into analysis.model; with `peaks`, captures what was live at each peak on the way.
void replay_all(Analysis& analysis, PeakCapture* peaks) {
  if (peaks) replay_records<true>(analysis, peaks);
  else replay_records<false>(analysis, nullptr);
  analysis.model.finish();
  for (const auto& [device, state] : analysis.model.devices())
    analysis.final_fragmentation[device] = analysis.model.fragmentation(device);
}

}  // namespace

const proto::Device* TraceInfo::device(uint32_t ordinal) const {
  for (const proto::Device& d : devices)
    if (d.ordinal() == ordinal) return &d;
  return nullptr;
}

bool Analysis::allocator_layer_seen() const {
  const auto& devices = model.devices();
  return std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.second.allocator_layer_seen; });
}

std::optional<uint64_t> Analysis::last_event_unix_ns() const {
  if (!info.start || info.start->start_unix_ns() == 0) return std::nullopt;
  uint64_t start = info.start->start_unix_ns();
  if (last_event_time_ns < 0 && uint64_t(-(last_event_time_ns + 1)) >= start) return 0;
  return start + uint64_t(last_event_time_ns);  // modular: adding a negative time subtracts it
}

void collect_live_at_peak(Analysis& analysis, const std::vector<int32_t>& devices, const SiteGrouping& grouping) {
  std::map<ReplayMoment, std::vector<int32_t>> devices_by_peak;
  for (int32_t device : devices)
    devices_by_peak[ReplayMoment::of(analysis.model.devices().at(device).peak_allocated())].push_back(device);
  std::vector<ReplayMoment> moments;
  for (const auto& [moment, at_peak] : devices_by_peak) moments.push_back(moment);

  MemoryModel replay;
  replay_to_moments(analysis.path, analysis.model.layer_hints(), replay, moments, [&](ReplayMoment moment) {
    for (int32_t device : devices_by_peak.at(moment)) {
      std::vector<LiveAllocation> live, outside;
      const DeviceState& state = replay.devices().at(device);
      replay.visit_live([&](const LiveAllocation& a) {
        if (state.counts_as_allocated(a)) live.push_back(a);
        else if (PeakCapture::is_outside_candidate(state, a)) outside.push_back(a);
      });
      analysis.live_at_peak[device] = group_by_call_site(live, grouping);
      analysis.outside_at_peak[device] = group_by_call_site(outside);  // one site per stack
      analysis.fragmentation_at_peak[device] = replay.fragmentation(device);
    }
  });
}

bool began_at_attach(const Analysis& a) { return a.info.start && a.info.start->origin() != proto::TraceStart::LAUNCH; }

std::string origin_name(proto::TraceStart::Origin origin) {
  return proto::TraceStart_Origin_IsValid(origin) ? proto::TraceStart_Origin_Name(origin)
                                                  : "ORIGIN_" + std::to_string(int(origin));
}

std::unique_ptr<Analysis> analyze_trace(const std::string& path, bool with_live_at_peak) {
  auto analysis = std::make_unique<Analysis>();
  analysis->path = path;
  std::optional<PeakCapture> peaks;
  if (with_live_at_peak) peaks.emplace(analysis->model);
  replay_all(*analysis, peaks ? &*peaks : nullptr);
  SiteGrouping grouping(analysis->stacks);  // every Stack and Module record is read by now
  analysis->leaks = find_leak_sites(analysis->model.live_at_exit(), analysis->leak_window_ns(),
                                    analysis->model.first_allocation_ns(analysis->model.live_at_exit()), grouping);
  if (peaks) {
    std::vector<int32_t> missing =
        peaks->finish(analysis->live_at_peak, analysis->fragmentation_at_peak, &analysis->outside_at_peak);
    for (auto& [device, per_stack] : analysis->live_at_peak) merge_call_sites(per_stack, grouping);
    if (!missing.empty()) collect_live_at_peak(*analysis, missing, grouping);
  }
  return analysis;
}

}  // namespace memtrace
