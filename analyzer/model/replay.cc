#include "model/replay.h"

#include "util/checked_math.h"

namespace memtrace {
namespace {

// Calls at_moment after each listed event and stops after the last: one comparison per event.
class MomentObserver {
 public:
  MomentObserver(std::span<const uint64_t> moments, const std::function<void(uint64_t)>& at_moment)
      : next_(moments.begin()), end_(moments.end()), at_moment_(at_moment) {}
  ReplayStep after_event(const EventFields&) {
    uint64_t index = index_++;
    if (index != *next_) return ReplayStep::kGoOn;
    at_moment_(index);
    while (next_ != end_ && *next_ == index) ++next_;  // an index listed twice is one moment
    return next_ == end_ ? ReplayStep::kStop : ReplayStep::kGoOn;
  }

 private:
  std::span<const uint64_t>::iterator next_, end_;
  const std::function<void(uint64_t)>& at_moment_;
  uint64_t index_ = 0;  // of the event just applied
};

}  // namespace

ReplayOutcome replay_to_moments(const std::string& path, const std::map<int32_t, LayerHint>& hints, MemoryModel& model,
                                std::span<const uint64_t> moments,
                                const std::function<void(uint64_t event_index)>& at_moment) {
  if (moments.empty()) return ReplayOutcome{};
  MomentObserver observer(moments, at_moment);
  return replay_trace(path, hints, model, observer);
}

WalkBudget::WalkBudget(uint64_t slack, uint64_t per_event, uint64_t events)
    : left_(saturating_add(slack, saturating_mul(per_event, events))) {}

bool WalkBudget::take(uint64_t allocations) {
  if (refused_ || allocations > left_) {
    refused_ = true;
    return false;
  }
  left_ -= allocations;
  return true;
}

}  // namespace memtrace
