#include "export/perfetto.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "model/replay.h"
#include "perfetto_trace.pb.h"
#include "util/format.h"

namespace memtrace {
namespace {

namespace pf = perfetto_proto;

constexpr uint32_t kSequenceId = 1;  // every packet is on one sequence
constexpr int kUuidRangeBits = 32;   // process k's tracks: uuids k * 2^32 + 1 (its process track), + 2, ...
constexpr size_t kMaxNvtxLanesPerThread = 16;
constexpr size_t kMaxNvtxTracks = 4096;

uint64_t clamp_time(int64_t ns) { return ns < 0 ? 0 : uint64_t(ns); }
int64_t clamp_value(uint64_t bytes) { return bytes > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(bytes); }

std::string device_name(int32_t device) {
  return device >= 0 ? "cuda:" + std::to_string(device) : std::string("unknown device");
}

// Writes one process's packets as the fields 1 of a Trace message, all on one sequence, the output's first packet
// clearing its state: the process's tracks with the uuids of its range, its times (ns since its trace's start,
// negative ones at 0) shifted by `time_offset_ns`.
class PacketWriter {
 public:
  PacketWriter(std::ostream& out, uint64_t process_index, uint64_t time_offset_ns, bool first_in_output)
      : out_(out),
        process_uuid_((process_index << kUuidRangeBits) + 1),
        time_offset_ns_(time_offset_ns),
        first_(first_in_output),
        next_uuid_(process_uuid_ + 1) {}
  uint64_t process_uuid() const { return process_uuid_; }
  uint64_t timestamp(int64_t time_ns) const { return time_offset_ns_ + clamp_time(time_ns); }
  void write(pf::TracePacket& packet) {
    packet.set_trusted_packet_sequence_id(kSequenceId);
    if (first_) packet.set_sequence_flags(pf::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    first_ = false;
    packet.SerializeToString(&body_);
    char head[11];
    size_t n = 0;
    head[n++] = 0x0a;  // field 1 (Trace.packet), wire type 2
    for (uint64_t size = body_.size();; size >>= 7) {
      head[n++] = char(size < 0x80 ? size : (size & 0x7f) | 0x80);
      if (size < 0x80) break;
    }
    out_.write(head, std::streamsize(n));
    out_.write(body_.data(), std::streamsize(body_.size()));
  }
  // A track under the process (a counter track in bytes where `counter`); returns its uuid.
  uint64_t declare_track(const std::string& name, bool counter) {
    pf::TracePacket packet;
    pf::TrackDescriptor* track = packet.mutable_track_descriptor();
    track->set_uuid(next_uuid_);
    track->set_parent_uuid(process_uuid_);
    track->set_name(name);
    if (counter) track->mutable_counter()->set_unit(pf::CounterDescriptor::UNIT_SIZE_BYTES);
    write(packet);
    return next_uuid_++;
  }
  void event(uint64_t track, int64_t time_ns, pf::TrackEvent::Type type, const std::string* name = nullptr) {
    pf::TracePacket packet;
    packet.set_timestamp(timestamp(time_ns));
    pf::TrackEvent* e = packet.mutable_track_event();
    e->set_type(type);
    e->set_track_uuid(track);
    if (name) e->set_name(*name);
    write(packet);
  }
  void counter(uint64_t track, int64_t time_ns, uint64_t bytes) {
    pf::TracePacket packet;
    packet.set_timestamp(timestamp(time_ns));
    pf::TrackEvent* e = packet.mutable_track_event();
    e->set_type(pf::TrackEvent::TYPE_COUNTER);
    e->set_track_uuid(track);
    e->set_counter_value(clamp_value(bytes));
    write(packet);
  }

 private:
  std::ostream& out_;
  const uint64_t process_uuid_;
  const uint64_t time_offset_ns_;
  std::string body_;
  bool first_;
  uint64_t next_uuid_;
};

// A process of a job's export named by what tells the ranks apart: "rank 1 / python / host-a", the parts the
// TraceStart has ("memtrace trace" where it has none).
std::string job_process_name(const Analysis& analysis) {
  std::string name;
  auto add = [&](const std::string& part) {
    if (!part.empty()) name += (name.empty() ? "" : " / ") + part;
  };
  if (analysis.info.start) {
    const proto::TraceStart& start = *analysis.info.start;
    if (start.has_rank()) add("rank " + std::to_string(start.rank()));
    if (start.argv_size() > 0) add(start.argv(0));
    add(start.hostname());
  }
  return name.empty() ? std::string("memtrace trace") : name;
}

// The process track: pid and command line of the TraceStart, named by `name` or else by the command line
// ("memtrace trace" without one).
void write_process(const Analysis& analysis, const std::optional<std::string>& name, PacketWriter& writer) {
  pf::TracePacket packet;
  pf::TrackDescriptor* track = packet.mutable_track_descriptor();
  track->set_uuid(writer.process_uuid());
  pf::ProcessDescriptor* process = track->mutable_process();
  std::string command;
  if (analysis.info.start) {
    process->set_pid(int32_t(analysis.info.start->pid()));
    for (const std::string& arg : analysis.info.start->argv()) {
      process->add_cmdline(arg);
      command += (command.empty() ? "" : " ") + arg;
    }
  }
  process->set_process_name(name ? *name : command.empty() ? std::string("memtrace trace") : command);
  writer.write(packet);
}

// One counter track: declared at its first value; its values one per change, or thinned (the header's rule).
class CounterTrack {
 public:
  CounterTrack(std::string name, std::optional<uint64_t> interval_ns)
      : name_(std::move(name)), interval_ns_(interval_ns) {}
  void add(PacketWriter& writer, int64_t time_ns, uint64_t bytes) {
    Point p{time_ns, bytes, seq_++};
    if (!interval_ns_) return emit(writer, p);
    uint64_t bin = clamp_time(time_ns) / *interval_ns_;
    if (bin_ && *bin_ != bin) flush(writer);
    if (!bin_) {
      bin_ = bin;
      low_ = high_ = last_ = p;
      return;
    }
    if (bytes < low_.bytes) low_ = p;
    if (bytes > high_.bytes) high_ = p;
    last_ = p;
  }
  // Writes the interval under way (thinned tracks).
  void flush(PacketWriter& writer) {
    if (!bin_) return;
    Point points[3] = {low_, high_, last_};
    std::sort(std::begin(points), std::end(points), [](const Point& a, const Point& b) { return a.seq < b.seq; });
    for (size_t i = 0; i < 3; ++i)
      if (i == 0 || points[i].seq != points[i - 1].seq) emit(writer, points[i]);
    bin_.reset();
  }

 private:
  struct Point {
    int64_t time_ns = 0;
    uint64_t bytes = 0;
    uint64_t seq = 0;  // order of arrival
  };
  void emit(PacketWriter& writer, const Point& p) {
    if (last_written_ && *last_written_ == p.bytes) return;
    if (!uuid_) uuid_ = writer.declare_track(name_, /*counter=*/true);
    writer.counter(*uuid_, p.time_ns, p.bytes);
    last_written_ = p.bytes;
  }
  std::string name_;
  std::optional<uint64_t> interval_ns_;
  std::optional<uint64_t> uuid_;
  std::optional<uint64_t> last_written_;
  uint64_t seq_ = 0;
  std::optional<uint64_t> bin_;
  Point low_, high_, last_;
};

struct DeviceCounters {
  DeviceCounters(int32_t device, std::optional<uint64_t> interval_ns)
      : allocated(device_name(device) + " allocated", interval_ns),
        reserved(device_name(device) + " reserved", interval_ns),
        driver(device_name(device) + " driver", interval_ns),
        device_used(device_name(device) + " device used", interval_ns),
        other_processes(device_name(device) + " other processes", interval_ns) {}
  CounterTrack allocated, reserved, driver, device_used, other_processes;
  void flush(PacketWriter& writer) {
    for (CounterTrack* t : {&allocated, &reserved, &driver, &device_used, &other_processes}) t->flush(writer);
  }
};

// "cuda:0 OOMs": an instant per listed OOM, named by its request, with its figures as annotations.
void write_ooms(const MemoryModel& model, PacketWriter& writer) {
  std::map<int32_t, uint64_t> tracks;
  for (const OomEvent& oom : model.ooms()) {
    auto it = tracks.find(oom.device);
    if (it == tracks.end())
      it = tracks.emplace(oom.device, writer.declare_track(device_name(oom.device) + " OOMs", false)).first;
    pf::TracePacket packet;
    packet.set_timestamp(writer.timestamp(oom.time_ns));
    pf::TrackEvent* e = packet.mutable_track_event();
    e->set_type(pf::TrackEvent::TYPE_INSTANT);
    e->set_track_uuid(it->second);
    e->set_name("OOM: " + format_bytes(oom.requested_bytes) + " requested");
    auto annotate = [&](const char* name, uint64_t value) {
      pf::DebugAnnotation* a = e->add_debug_annotations();
      a->set_name(name);
      a->set_uint_value(value);
    };
    annotate("requested_bytes", oom.requested_bytes);
    annotate("device_free_bytes", oom.device_free_bytes);
    annotate("device_total_bytes", oom.device_total_bytes);
    pf::DebugAnnotation* api = e->add_debug_annotations();
    api->set_name("api");
    api->set_string_value(proto::Api_Name(oom.api));
    writer.write(packet);
  }
}

// NVTX ranges as slices, on tracks where each nests properly (the header): ranges by thread, in order of their
// begin (the longer first where two begin together), each on the first track of its thread where it fits inside
// the innermost range still open, else on a new one (at most kMaxNvtxLanesPerThread a thread, kMaxNvtxTracks in all;
// ranges that find none are left out). Times are clamped so that a range never ends before it begins; a range the
// trace does not close ends at `trace_end_ns`.
class NvtxLanes {
 public:
  NvtxLanes(PacketWriter& writer, int64_t trace_end_ns) : writer_(writer), trace_end_ns_(trace_end_ns) {}
  void write(const std::vector<NvtxRange>& ranges) {
    std::vector<Span> spans;
    spans.reserve(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
      const NvtxRange& r = ranges[i];
      int64_t begin = std::max<int64_t>(r.begin_ns, 0);
      int64_t end = std::max(begin, r.end_ns < 0 ? trace_end_ns_ : r.end_ns);
      spans.push_back(Span{r.tid, begin, end, i});
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      if (a.tid != b.tid) return a.tid < b.tid;
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.end != b.end) return a.end > b.end;
      return a.index < b.index;
    });
    for (const Span& s : spans) place(s, ranges[s.index].name);
    for (auto& [tid, lanes] : lanes_)
      for (Lane& lane : lanes) close_until(lane, INT64_MAX);
  }

 private:
  struct Span {
    uint32_t tid;
    int64_t begin, end;
    size_t index;
  };
  struct Lane {
    uint64_t uuid;
    std::vector<int64_t> open_ends;  // innermost last
  };
  void close_until(Lane& lane, int64_t time_ns) {
    while (!lane.open_ends.empty() && lane.open_ends.back() <= time_ns) {
      writer_.event(lane.uuid, lane.open_ends.back(), pf::TrackEvent::TYPE_SLICE_END);
      lane.open_ends.pop_back();
    }
  }
  void place(const Span& s, const std::string& name) {
    std::vector<Lane>& lanes = lanes_[s.tid];
    std::optional<size_t> fit;
    for (size_t k = 0; k < lanes.size(); ++k) {
      close_until(lanes[k], s.begin);
      if (!fit && (lanes[k].open_ends.empty() || lanes[k].open_ends.back() >= s.end)) fit = k;
    }
    if (!fit) {
      if (lanes.size() >= kMaxNvtxLanesPerThread || tracks_ >= kMaxNvtxTracks) return;
      std::string track = "NVTX thread " + std::to_string(s.tid);
      if (!lanes.empty()) track += " (" + std::to_string(lanes.size() + 1) + ")";
      lanes.push_back(Lane{writer_.declare_track(track, false), {}});
      ++tracks_;
      fit = lanes.size() - 1;
    }
    Lane& lane = lanes[*fit];
    const std::string label = name.empty() ? std::string("(unnamed range)") : name;
    writer_.event(lane.uuid, s.begin, pf::TrackEvent::TYPE_SLICE_BEGIN, &label);
    lane.open_ends.push_back(s.end);
  }
  PacketWriter& writer_;
  int64_t trace_end_ns_;
  std::map<uint32_t, std::vector<Lane>> lanes_;
  size_t tracks_ = 0;
};

// The "iterations" track, written as the replay reaches each event: a slice per iteration ("iteration 1" from its
// first event to its end), and in it a slice per run of events of one phase ("forward" from the run's first event to
// the next run's, or to the iteration's end). Times never go back on the track, so that slices nest whatever the
// trace's clock did.
class IterationSlices {
 public:
  IterationSlices(const EventPhases& phases, PacketWriter& writer) : phases_(phases), writer_(writer) {
    if (!phases.iterations.empty()) track_ = writer.declare_track("iterations", false);
  }
  void at_event(uint64_t index, int64_t time_ns) {
    if (!track_) return;
    int32_t k = index < phases_.iteration_of_event.size() ? phases_.iteration_of_event[index] : -1;
    if (k < 0 || size_t(k) >= phases_.iterations.size()) k = -1;
    if (k != iteration_) {
      close_iteration();
      if (k >= 0) {
        iteration_ = k;
        begin(phases_.iterations[size_t(k)].begin_ns, "iteration " + std::to_string(k + 1));
        phase_.reset();
      }
    }
    if (iteration_ < 0) return;
    Phase phase = index < phases_.phase_of_event.size() ? phases_.phase_of_event[index] : Phase::kOutside;
    if (phase_ && *phase_ == phase) return;
    if (phase_) end(time_ns);
    begin(time_ns, phase_name(phase));
    phase_ = phase;
  }
  void finish() { close_iteration(); }

 private:
  void close_iteration() {
    if (iteration_ < 0) return;
    int64_t end_ns = phases_.iterations[size_t(iteration_)].end_ns;
    if (phase_) end(end_ns);
    end(end_ns);
    iteration_ = -1;
    phase_.reset();
  }
  void begin(int64_t time_ns, const std::string& name) {
    clock_ns_ = std::max(clock_ns_, time_ns);
    writer_.event(*track_, clock_ns_, pf::TrackEvent::TYPE_SLICE_BEGIN, &name);
  }
  void end(int64_t time_ns) {
    clock_ns_ = std::max(clock_ns_, time_ns);
    writer_.event(*track_, clock_ns_, pf::TrackEvent::TYPE_SLICE_END);
  }
  const EventPhases& phases_;
  PacketWriter& writer_;
  std::optional<uint64_t> track_;
  int32_t iteration_ = -1;
  std::optional<Phase> phase_;
  int64_t clock_ns_ = 0;
};

// The replay's observer: DEVICE_USAGE samples to their counters, each event to the iteration slices. The totals go
// to the counters through the model's totals callback (set up in write_perfetto).
class PerfettoReplay {
 public:
  PerfettoReplay(const MemoryModel& model, PacketWriter& writer, IterationSlices& slices,
                 std::map<int32_t, DeviceCounters>& devices, std::optional<uint64_t> interval_ns)
      : model_(model), writer_(writer), slices_(slices), devices_(devices), interval_ns_(interval_ns) {}
  ReplayStep after_event(const EventFields& e) {
    const int64_t now = model_.now_ns();
    if (e.kind() == proto::DEVICE_USAGE && valid_device_ordinal(e.device())) {
      DeviceCounters& d = counters(e.device());
      d.device_used.add(writer_, now,
                        e.device_total_bytes() > e.device_free_bytes() ? e.device_total_bytes() - e.device_free_bytes()
                                                                       : 0);
      if (e.has_other_processes_used_bytes()) d.other_processes.add(writer_, now, e.other_processes_used_bytes());
    }
    slices_.at_event(model_.next_event_index() - 1, now);
    return ReplayStep::kGoOn;
  }
  DeviceCounters& counters(int32_t device) {
    auto it = devices_.find(device);
    if (it == devices_.end()) it = devices_.emplace(device, DeviceCounters(device, interval_ns_)).first;
    return it->second;
  }

 private:
  const MemoryModel& model_;
  PacketWriter& writer_;
  IterationSlices& slices_;
  std::map<int32_t, DeviceCounters>& devices_;
  std::optional<uint64_t> interval_ns_;
};

// The thinning interval, where the trace has more events than options.max_exact_events.
std::optional<uint64_t> thinning_interval(const Analysis& analysis, const PerfettoOptions& options) {
  if (analysis.model.health().events <= options.max_exact_events) return std::nullopt;
  uint64_t duration = std::max<uint64_t>(clamp_time(analysis.duration_ns()), clamp_time(analysis.last_event_time_ns));
  uint64_t intervals = std::max<uint64_t>(options.thinning_intervals, 1);
  return std::max<uint64_t>(duration / intervals + (duration % intervals != 0), 1);
}

// One process's tracks and events through `writer`, its process track named by `name` (else its command line).
void write_process_tracks(const ExportSource& source, const std::optional<std::string>& name, PacketWriter& writer,
                          const PerfettoOptions& options) {
  const Analysis& analysis = source.analysis();
  const EventPhases& phases = source.phases();
  write_process(analysis, name, writer);
  write_ooms(analysis.model, writer);
  NvtxLanes(writer, analysis.duration_ns()).write(analysis.nvtx_ranges);
  IterationSlices slices(phases, writer);

  const std::optional<uint64_t> interval_ns = thinning_interval(analysis, options);
  std::map<int32_t, DeviceCounters> devices;
  MemoryModel model;
  PerfettoReplay observer(model, writer, slices, devices, interval_ns);
  model.set_totals_callback([&](int32_t device, int64_t time_ns, const DeviceTotals& totals) {
    DeviceCounters& d = observer.counters(device);
    d.allocated.add(writer, time_ns, totals.allocated_bytes);
    d.reserved.add(writer, time_ns, totals.reserved_bytes);
    d.driver.add(writer, time_ns, totals.driver_bytes);
  });
  replay_trace(source.path(), analysis.model.layer_hints(), model, observer);
  slices.finish();
  for (auto& [device, d] : devices) d.flush(writer);
}

}  // namespace

void write_perfetto(const ExportSource& source, std::ostream& out) { write_perfetto(source, out, PerfettoOptions{}); }

void write_perfetto(const ExportSource& source, std::ostream& out, const PerfettoOptions& options) {
  PacketWriter writer(out, 0, 0, /*first_in_output=*/true);
  write_process_tracks(source, std::nullopt, writer, options);
}

PerfettoJobWriter::PerfettoJobWriter(std::ostream& out, const PerfettoOptions& options)
    : out_(out), options_(options) {}

void PerfettoJobWriter::add(const ExportSource& source) {
  const Analysis& analysis = source.analysis();
  const uint64_t start_unix_ns = analysis.info.start ? analysis.info.start->start_unix_ns() : 0;
  PacketWriter writer(out_, processes_, start_unix_ns, /*first_in_output=*/processes_ == 0);
  ++processes_;
  write_process_tracks(source, job_process_name(analysis), writer, options_);
}

}  // namespace memtrace
