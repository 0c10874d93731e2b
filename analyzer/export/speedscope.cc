#include "export/speedscope.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "export/folded.h"
#include "model/replay.h"
#include "util/checked_math.h"
#include "util/format.h"

namespace memtrace {
namespace {

struct Profile {
  std::string name;
  BytesByStack bytes;
};

void add_bytes(BytesByStack& bytes, const std::vector<uint32_t>& stack, uint64_t n) {
  uint64_t& sum = bytes[stack];
  sum = saturating_add(sum, n);
}

// Sums the bytes of every successful allocation of the allocated kind by stack id, as a replay applies them.
// "Of the allocated kind" is judged with each device's layers as the whole trace shows them (the first pass's
// final state), as the peak's call sites are. A stack id the trace never defined counts as 0 ("[no stack]"), so
// that the sums grow with the trace's stacks, not with the ids its events name.
class AllocatedBytesByStack {
 public:
  AllocatedBytesByStack(const MemoryModel& replay, const Analysis& analysis)
      : replay_(replay), final_devices_(analysis.model.devices()), stacks_(analysis.stacks) {}

  ReplayStep after_event(const EventFields& e) {
    if (e.kind() != proto::ALLOC || e.result() != 0 || e.graph() != 0 || e.capture_id() != 0) return ReplayStep::kGoOn;
    const LiveAllocation* a = made_by_last_event(e.address());
    if (!a) return ReplayStep::kGoOn;  // a duplicate the model dropped, a device it does not replay
    auto device = final_devices_.find(a->device);
    if (device == final_devices_.end() || !device->second.counts_as_allocated(*a)) return ReplayStep::kGoOn;
    uint64_t& sum = bytes_[stacks_.frames(a->stack_id) ? a->stack_id : 0];
    sum = saturating_add(sum, a->size_bytes);
    return ReplayStep::kGoOn;
  }
  const std::map<uint64_t, uint64_t>& bytes() const { return bytes_; }

 private:
  // The allocation the last event applied made live at `address`, in whichever table its layer and API put it.
  const LiveAllocation* made_by_last_event(uint64_t address) const {
    const uint64_t index = replay_.next_event_index() - 1;
    for (AddressSpace space : {AddressSpace::kTorchBlock, AddressSpace::kPoolBlock, AddressSpace::kDriverPointer,
                               AddressSpace::kDriverHandle}) {
      const LiveAllocation* a = replay_.find_live(space, address);
      // One live at attach has the next event's index (event 0's) but was not made by it.
      if (a && a->event_index == index && !a->before_attach) return a;
    }
    return nullptr;
  }

  const MemoryModel& replay_;
  const std::map<int32_t, DeviceState>& final_devices_;
  const StackTable& stacks_;
  std::map<uint64_t, uint64_t> bytes_;
};

Profile alloc_space_profile(const ExportSource& source, FoldedStackTable& table) {
  MemoryModel replay;
  AllocatedBytesByStack sums(replay, source.analysis());
  replay_trace(source.path(), source.analysis().model.layer_hints(), replay, sums);
  Profile profile{"all devices: every allocation (alloc_space)", {}};
  for (const auto& [stack_id, bytes] : sums.bytes()) add_bytes(profile.bytes, table.stack(stack_id), bytes);
  return profile;
}

// The two profiles of each device that has a peak allocated or leak candidates, in ascending order of ordinal.
std::vector<Profile> device_profiles(const Analysis& analysis, FoldedStackTable& table) {
  std::map<int32_t, const std::vector<CallSite>*> peak_sites;
  for (const auto& [device, sites] : analysis.live_at_peak)
    if (!sites.empty()) peak_sites[device] = &sites;
  std::set<int32_t> devices;
  for (const auto& [device, sites] : peak_sites) devices.insert(device);
  for (const LeakSite& leak : analysis.leaks) devices.insert(leak.site.device);
  std::vector<Profile> profiles;
  for (int32_t device : devices) {
    const std::string name = "device " + std::to_string(device);
    auto state = analysis.model.devices().find(device);
    const int64_t peak_ns = state == analysis.model.devices().end() ? 0 : state->second.peak_allocated().time_ns;
    Profile peak{name + ": live at peak allocated (" + format_seconds(seconds(peak_ns)) + ")", {}};
    if (auto sites = peak_sites.find(device); sites != peak_sites.end())
      for (const CallSite& site : *sites->second) add_bytes(peak.bytes, table.stack(site.stack_id), site.bytes);
    Profile exit{name + ": live at exit (leak candidates)", {}};
    for (const LeakSite& leak : analysis.leaks)
      if (leak.site.device == device) add_bytes(exit.bytes, table.stack(leak.site.stack_id), leak.site.bytes);
    profiles.push_back(std::move(peak));
    profiles.push_back(std::move(exit));
  }
  return profiles;
}

nlohmann::ordered_json profile_json(const Profile& profile) {
  nlohmann::ordered_json samples = nlohmann::ordered_json::array(), weights = nlohmann::ordered_json::array();
  uint64_t total = 0;
  for (const auto& [stack, bytes] : largest_first(profile.bytes)) {
    samples.push_back(stack);
    weights.push_back(bytes);
    total = saturating_add(total, bytes);
  }
  return {{"type", "sampled"}, {"name", profile.name}, {"unit", "bytes"},   {"startValue", 0},
          {"endValue", total}, {"samples", samples},   {"weights", weights}};
}

nlohmann::ordered_json frame_json(const FoldedFrame& frame) {
  nlohmann::ordered_json j = {{"name", frame.label}};
  if (!frame.file.empty()) j["file"] = frame.file;
  if (frame.line != 0) j["line"] = frame.line;
  return j;
}

std::string file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

void write_speedscope(const ExportSource& source, std::ostream& out) {
  FoldedStackTable table(source.resolver());
  std::vector<Profile> profiles = device_profiles(source.analysis(), table);
  profiles.push_back(alloc_space_profile(source, table));
  nlohmann::ordered_json frames = nlohmann::ordered_json::array();
  for (const FoldedFrame& frame : table.frames()) frames.push_back(frame_json(frame));
  nlohmann::ordered_json profile_list = nlohmann::ordered_json::array();
  for (const Profile& profile : profiles) profile_list.push_back(profile_json(profile));
  nlohmann::ordered_json file = {{"$schema", "https://www.speedscope.app/file-format-schema.json"},
                                 {"name", file_name(source.path())},
                                 {"exporter", "memtrace " MEMTRACE_VERSION},
                                 {"activeProfileIndex", 0},
                                 {"shared", {{"frames", std::move(frames)}}},
                                 {"profiles", std::move(profile_list)}};
  // The trace's text is valid UTF-8 (the reader repairs it); `replace` is the belt to those braces.
  out << file.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

}  // namespace memtrace
