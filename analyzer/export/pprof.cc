#include "export/pprof.h"

#include <zlib.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "model/replay.h"
#include "profile.pb.h"
#include "read/trace_reader.h"
#include "stacks/folded_stack.h"

namespace memtrace {
namespace {

namespace pp = pprof_proto;

// The walks of the live allocations at the devices' peaks, all together (model/replay.h WalkBudget): past it, a
// device's peak has no inuse samples (only a trace of very many devices with very many live allocations gets there).
constexpr uint64_t kWalkSlack = uint64_t{1} << 24;
constexpr uint64_t kWalkPerEvent = 64;

// The values of one sample, in the order of kSampleTypes.
struct Values {
  uint64_t alloc_objects = 0, alloc_bytes = 0, exit_objects = 0, exit_bytes = 0, inuse_objects = 0, inuse_bytes = 0;
};
constexpr const char* kSampleTypes[][2] = {{"alloc_objects", "count"}, {"alloc_space", "bytes"},
                                           {"exit_objects", "count"},  {"exit_space", "bytes"},
                                           {"inuse_objects", "count"}, {"inuse_space", "bytes"}};

// (stack id, device, phase, allocated before attach): what was live at attach has no stack, and a frame of its own.
using StackKey = std::tuple<uint64_t, int32_t, Phase, bool>;

// The one frame of what was live at attach, made before the tracer recorded.
constexpr const char* kBeforeAttachFrame = "[allocated before attach]";

int64_t clamp_value(uint64_t v) { return v > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v); }
uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

std::string device_name(int32_t device) {
  return device >= 0 ? "cuda:" + std::to_string(device) : std::string("unknown device");
}

// The replay: every allocation of the allocated kind, and what is live at each device's peak allocated (before the
// first event where the peak was reached at attach).
class PprofReplay {
 public:
  PprofReplay(const Analysis& analysis, const EventPhases& phases, const MemoryModel& model,
              std::map<StackKey, Values>& values)
      : phases_(phases),
        model_(model),
        values_(values),
        hints_(analysis.model.layer_hints()),
        peak_devices_(devices_with_peaks(analysis)),
        peaks_(peak_moments(analysis, peak_devices_)),
        budget_(kWalkSlack, kWalkPerEvent, analysis.model.health().events) {}
  void before_event(const EventFields&) {
    peaks_.before_event(model_.next_event_index(), [&](size_t i) { take_peak(peak_devices_[i]); });
  }
  ReplayStep after_event(const EventFields& e) {
    const uint64_t index = model_.next_event_index() - 1;
    if (e.kind() == proto::ALLOC && e.result() == 0) count_allocation(e, index);
    peaks_.after_event(index, [&](size_t i) { take_peak(peak_devices_[i]); });
    return ReplayStep::kGoOn;
  }
  // After the replay: a peak at attach with no event after it.
  void finish() {
    peaks_.at_end(model_.next_event_index(), [&](size_t i) { take_peak(peak_devices_[i]); });
  }
  Phase phase_of(uint64_t event_index) const {
    return event_index < phases_.phase_of_event.size() ? phases_.phase_of_event[event_index] : Phase::kOutside;
  }
  StackKey key_of(const LiveAllocation& a) const {
    return a.before_attach ? StackKey{0, a.device, Phase::kOutside, true}
                           : StackKey{a.stack_id, a.device, phase_of(a.event_index), false};
  }

 private:
  // The allocation the event made, if the model holds it live now (graph memory nodes are not memory yet).
  const LiveAllocation* made_by(const EventFields& e, uint64_t index) const {
    for (AddressSpace space : {AddressSpace::kTorchBlock, AddressSpace::kPoolBlock, AddressSpace::kDriverPointer,
                               AddressSpace::kDriverHandle}) {
      const LiveAllocation* a = model_.find_live(space, e.address());
      // One live at attach has the next event's index (event 0's) but was not made by it.
      if (a && a->event_index == index && !a->before_attach) return a;
    }
    return nullptr;
  }
  // Whether `a` counts towards its device's allocated total, with the layers the device shows over the whole trace.
  bool allocated_kind(const LiveAllocation& a) const {
    if (!a.charged_to_device()) return false;
    auto hint = hints_.find(a.device);
    bool blocks = hint != hints_.end() && hint->second.block_layer;
    return blocks ? is_block_space(a.space) && a.memory == proto::MEMORY_DEVICE : true;
  }
  void count_allocation(const EventFields& e, uint64_t index) {
    const LiveAllocation* a = made_by(e, index);
    if (!a || !allocated_kind(*a)) return;
    Values& v = values_[StackKey{a->stack_id, a->device, phase_of(index), false}];
    v.alloc_objects = add(v.alloc_objects, 1);
    v.alloc_bytes = add(v.alloc_bytes, a->size_bytes);
  }
  void take_peak(int32_t device) {
    if (!budget_.take(model_.live_allocations())) return;
    model_.visit_allocated(device, [&](const LiveAllocation& a) {
      Values& v = values_[key_of(a)];
      v.inuse_objects = add(v.inuse_objects, 1);
      v.inuse_bytes = add(v.inuse_bytes, a.size_bytes);
    });
    // Blocks live at attach that were not listed one by one (blocks_unknown): bytes, no allocation to count.
    if (uint64_t unlisted = model_.unlisted_allocated_bytes(device)) {
      Values& v = values_[StackKey{0, device, Phase::kOutside, true}];
      v.inuse_bytes = add(v.inuse_bytes, unlisted);
    }
  }
  static std::vector<int32_t> devices_with_peaks(const Analysis& analysis) {
    std::vector<int32_t> devices;
    for (const auto& [device, state] : analysis.model.devices())
      if (state.peak_allocated().bytes > 0) devices.push_back(device);
    return devices;
  }
  static std::vector<ReplayMoment> peak_moments(const Analysis& analysis, const std::vector<int32_t>& devices) {
    std::vector<ReplayMoment> moments;
    for (int32_t device : devices)
      moments.push_back(ReplayMoment::of(analysis.model.devices().at(device).peak_allocated()));
    return moments;
  }

  const EventPhases& phases_;
  const MemoryModel& model_;
  std::map<StackKey, Values>& values_;
  std::map<int32_t, LayerHint> hints_;
  std::vector<int32_t> peak_devices_;  // the devices with a peak allocated, in the order of peaks_' moments
  MomentCursor peaks_;
  WalkBudget budget_;
};

// Builds the Profile: its string table, functions and locations as samples refer to them.
class ProfileBuilder {
 public:
  ProfileBuilder() { string_id(""); }
  int64_t string_id(const std::string& s) {
    auto [it, added] = strings_.emplace(s, int64_t(strings_.size()));
    if (added) profile_.add_string_table(s);
    return it->second;
  }
  // The one location of what was live at attach.
  std::vector<uint64_t> before_attach_locations() { return {location_id(FoldedFrame{kBeforeAttachFrame})}; }
  // The locations of `stack`, leaf first.
  const std::vector<uint64_t>& locations(uint64_t stack_id, FrameResolver& resolver) {
    auto it = stacks_.find(stack_id);
    if (it != stacks_.end()) return it->second;
    std::vector<FoldedFrame> folded = fold_stack(resolver.resolve(stack_id));
    std::vector<uint64_t> ids;
    ids.reserve(folded.size());
    for (auto f = folded.rbegin(); f != folded.rend(); ++f) ids.push_back(location_id(*f));
    return stacks_.emplace(stack_id, std::move(ids)).first->second;
  }
  pp::Profile& profile() { return profile_; }

 private:
  uint64_t function_id(const FoldedFrame& f) {
    auto key = std::make_pair(f.label, f.file);
    auto it = functions_.find(key);
    if (it != functions_.end()) return it->second;
    pp::Function* function = profile_.add_function();
    function->set_id(uint64_t(profile_.function_size()));
    // No system_name: pprof demangles a function whose name equals its system_name, and its fallback for a name
    // that looks demangled strips "<...>", which takes "<module>" and "<lambda>" off Python frames
    // (google/pprof internal/symbolizer: demangleSingleFunction). The labels are names already.
    function->set_name(string_id(f.label));
    function->set_filename(string_id(f.file));
    return functions_.emplace(key, function->id()).first->second;
  }
  uint64_t location_id(const FoldedFrame& f) {
    auto key = std::make_pair(function_id(f), f.line);
    auto it = locations_.find(key);
    if (it != locations_.end()) return it->second;
    pp::Location* location = profile_.add_location();
    location->set_id(uint64_t(profile_.location_size()));
    pp::Line* line = location->add_line();
    line->set_function_id(key.first);
    line->set_line(f.line);
    return locations_.emplace(key, location->id()).first->second;
  }

  pp::Profile profile_;
  std::unordered_map<std::string, int64_t> strings_;
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;  // (label, file)
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> locations_;        // (function, line)
  std::unordered_map<uint64_t, std::vector<uint64_t>> stacks_;
};

// Writes `bytes` gzip'ed (zlib's deflate with the gzip wrapper) to `out`.
void write_gzip(const std::string& bytes, std::ostream& out) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());  // a profile is far below 4 GiB: its size follows the stacks, not the events
  char buffer[1 << 16];
  int status;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = deflate(&z, Z_FINISH);
    out.write(buffer, std::streamsize(sizeof buffer - z.avail_out));
  } while (status == Z_OK);
  deflateEnd(&z);
  if (status != Z_STREAM_END) throw std::runtime_error("zlib: deflate failed");
}

}  // namespace

void write_pprof(const ExportSource& source, std::ostream& out) {
  const Analysis& analysis = source.analysis();
  const EventPhases& phases = source.phases();
  std::map<StackKey, Values> values;
  MemoryModel model;
  PprofReplay observer(analysis, phases, model, values);
  replay_trace(source.path(), analysis.model.layer_hints(), model, observer);
  observer.finish();
  for (const LiveAllocation& a : analysis.model.live_at_exit()) {
    Values& v = values[observer.key_of(a)];
    v.exit_objects = add(v.exit_objects, 1);
    v.exit_bytes = add(v.exit_bytes, a.size_bytes);
  }
  // What was live at attach and still is at exit: listed apart from the call sites (they have none).
  for (const BeforeAttachLive& b : analysis.model.before_attach_live_at_exit()) {
    Values& v = values[StackKey{0, b.device, Phase::kOutside, true}];
    v.exit_objects = add(v.exit_objects, b.allocations);
    v.exit_bytes = add(v.exit_bytes, add(b.bytes, b.unlisted_bytes));
  }

  ProfileBuilder builder;
  pp::Profile& profile = builder.profile();
  for (const auto& [type, unit] : kSampleTypes) {
    pp::ValueType* t = profile.add_sample_type();
    t->set_type(builder.string_id(type));
    t->set_unit(builder.string_id(unit));
  }
  // Stacks that fold alike are one sample.
  std::map<std::tuple<std::vector<uint64_t>, int32_t, Phase>, Values> samples;
  for (const auto& [key, v] : values) {
    const auto& [stack_id, device, phase, before_attach] = key;
    Values& s =
        samples[{before_attach ? builder.before_attach_locations() : builder.locations(stack_id, source.resolver()),
                 device, phase}];
    s.alloc_objects = add(s.alloc_objects, v.alloc_objects);
    s.alloc_bytes = add(s.alloc_bytes, v.alloc_bytes);
    s.exit_objects = add(s.exit_objects, v.exit_objects);
    s.exit_bytes = add(s.exit_bytes, v.exit_bytes);
    s.inuse_objects = add(s.inuse_objects, v.inuse_objects);
    s.inuse_bytes = add(s.inuse_bytes, v.inuse_bytes);
  }
  const bool with_phase = phases.source != IterationSource::kNone;
  for (const auto& [key, v] : samples) {
    const auto& [locations, device, phase] = key;
    pp::Sample* sample = profile.add_sample();
    for (uint64_t id : locations) sample->add_location_id(id);
    for (uint64_t value :
         {v.alloc_objects, v.alloc_bytes, v.exit_objects, v.exit_bytes, v.inuse_objects, v.inuse_bytes})
      sample->add_value(clamp_value(value));
    pp::Label* label = sample->add_label();
    label->set_key(builder.string_id("device"));
    label->set_str(builder.string_id(device_name(device)));
    if (with_phase) {
      label = sample->add_label();
      label->set_key(builder.string_id("phase"));
      label->set_str(builder.string_id(phase_name(phase)));
    }
  }
  if (analysis.info.start) profile.set_time_nanos(clamp_value(analysis.info.start->start_unix_ns()));
  profile.set_duration_nanos(analysis.duration_ns() > 0 ? analysis.duration_ns() : 0);
  profile.add_comment(
      builder.string_id("memtrace: inuse_* at each device's peak allocated, exit_* live at exit "
                        "(leak candidates), alloc_* every allocation of the trace"));
  profile.set_default_sample_type(builder.string_id("inuse_space"));
  write_gzip(profile.SerializeAsString(), out);
}

}  // namespace memtrace
