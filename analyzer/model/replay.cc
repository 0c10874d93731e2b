#include "model/replay.h"

#include <optional>

#include "util/checked_math.h"

namespace memtrace {
namespace {

// Calls at_moment at each listed moment and stops after the last: a comparison or two per event.
class MomentObserver {
 public:
  MomentObserver(std::span<const ReplayMoment> moments, const std::function<void(ReplayMoment)>& at_moment)
      : moments_(moments), cursor_(moments), at_moment_(at_moment) {}
  void before_event(const EventFields&) {
    cursor_.before_event(index_, [&](size_t i) { take(i); });
  }
  ReplayStep after_event(const EventFields&) {
    cursor_.after_event(index_++, [&](size_t i) { take(i); });
    return cursor_.done() ? ReplayStep::kStop : ReplayStep::kGoOn;
  }
  void at_end() {
    cursor_.at_end(index_, [&](size_t i) { take(i); });
  }

 private:
  void take(size_t i) {
    if (taken_ && *taken_ == moments_[i]) return;  // a moment listed twice is one moment
    taken_ = moments_[i];
    at_moment_(moments_[i]);
  }
  std::span<const ReplayMoment> moments_;
  MomentCursor cursor_;
  const std::function<void(ReplayMoment)>& at_moment_;
  uint64_t index_ = 0;  // of the next event
  std::optional<ReplayMoment> taken_;
};

}  // namespace

ReplayOutcome replay_to_moments(const std::string& path, const std::map<int32_t, LayerHint>& hints, MemoryModel& model,
                                std::span<const ReplayMoment> moments,
                                const std::function<void(ReplayMoment moment)>& at_moment) {
  if (moments.empty()) return ReplayOutcome{};
  MomentObserver observer(moments, at_moment);
  ReplayOutcome outcome = replay_trace(path, hints, model, observer);
  if (!outcome.stopped) observer.at_end();
  return outcome;
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
