#include "analysis/device_facts.h"

#include <algorithm>

namespace memtrace {

DeviceFacts* DeviceFactsCollector::facts_of(int32_t device) {
  auto it = facts_.find(device);
  if (it != facts_.end()) return &it->second;
  if (facts_.size() >= kMaxDevicesWithFacts) return nullptr;
  return &facts_[device];
}

void DeviceFactsCollector::note_first_allocation(const EventFields& event, int64_t time_ns) {
  DeviceFacts* facts = facts_of(event.device());
  if (!facts) return;
  if (!facts->allocated) {
    facts->allocated = true;
    facts->first_allocation_ns = time_ns;
    facts->first_allocation_stack_id = event.stack_id();
  }
  seen_last_ = true;
  last_device_ = event.device();
}

namespace {

// Drops every other sample (the odd positions), keeping the one with the largest other_processes_used_bytes.
void thin(std::vector<UsageSample>& samples) {
  auto largest = std::max_element(samples.begin(), samples.end(), [](const UsageSample& a, const UsageSample& b) {
    return a.other_processes_used_bytes < b.other_processes_used_bytes;
  });
  const size_t keep = size_t(largest - samples.begin());
  size_t out = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    if (i % 2 == 0 || i == keep) samples[out++] = samples[i];
  samples.resize(out);
}

}  // namespace

void DeviceFactsCollector::note_sample(const EventFields& event, int64_t time_ns) {
  if (!event.has_process_used_bytes() || !event.has_other_processes_used_bytes()) return;
  DeviceFacts* facts = facts_of(event.device());
  if (!facts) return;
  const uint64_t total = event.device_total_bytes(), free = event.device_free_bytes();
  facts->samples.push_back(UsageSample{time_ns, total > free ? total - free : 0, event.process_used_bytes(),
                                       event.other_processes_used_bytes()});
  if (facts->samples.size() >= kMaxSamplesKept) thin(facts->samples);
}

}  // namespace memtrace
