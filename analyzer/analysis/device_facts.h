// What the many-process views need of each device beyond its totals, gathered in the analysis's one pass
// (analysis.h): where and when the process first allocated on it (what names "rank 3 also touched GPU 0 from
// train.py:42"), and the NVML samples of the device as a series (the model keeps only the last and the
// largest), from which the untraced processes on a shared GPU are told (fleet/fleet.h).
//
// Bounded whatever the trace holds: at most kMaxSamplesKept samples per device, thinned by dropping every other
// one when full (the samples stay evenly spread over the trace), the sample with the largest
// other_processes_used_bytes always kept; at most kMaxDevicesWithFacts devices.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "read/event_fields.h"

namespace memtrace {

// One DEVICE_USAGE event with NVML's per-process figures (events without them are not kept).
struct UsageSample {
  int64_t time_ns = 0;      // trace time
  uint64_t used_bytes = 0;  // device_total_bytes - device_free_bytes (0 when free > total)
  uint64_t process_used_bytes = 0;
  uint64_t other_processes_used_bytes = 0;
  bool operator==(const UsageSample&) const = default;
};

struct DeviceFacts {
  bool allocated = false;           // a successful ALLOC of device memory was seen
  int64_t first_allocation_ns = 0;  // its time
  uint64_t first_allocation_stack_id = 0;
  std::vector<UsageSample> samples;  // in time order
};

class DeviceFactsCollector {
 public:
  static constexpr size_t kMaxSamplesKept = 2048;
  static constexpr size_t kMaxDevicesWithFacts = 64;

  // After the model applied `event` (its time is `time_ns`). Cheap for every event but the two kinds it keeps.
  void on_event(const EventFields& event, int64_t time_ns) {
    const proto::EventKind kind = event.kind();
    if (kind == proto::ALLOC) [[likely]] {
      note_allocation(event, time_ns);
    } else if (kind == proto::DEVICE_USAGE) {
      note_sample(event, time_ns);
    }
  }
  std::map<int32_t, DeviceFacts> take() { return std::move(facts_); }

 private:
  DeviceFacts* facts_of(int32_t device);
  void note_allocation(const EventFields& event, int64_t time_ns) {
    if (event.result() != 0 || !charged_to_device(event.memory())) return;
    if (seen_last_ && event.device() == last_device_) [[likely]]
      return;
    note_first_allocation(event, time_ns);
  }
  static bool charged_to_device(proto::Memory memory) {
    return memory == proto::MEMORY_DEVICE || memory == proto::MEMORY_ARRAY;
  }
  void note_first_allocation(const EventFields& event, int64_t time_ns);
  void note_sample(const EventFields& event, int64_t time_ns);

  std::map<int32_t, DeviceFacts> facts_;
  // The device of the last allocation seen, already noted: most allocations are of the device before.
  bool seen_last_ = false;
  int32_t last_device_ = 0;
};

}  // namespace memtrace
