// What `summary` shows of each device's peak allocated moment (the call sites live there and the free
// space inside reserved memory), taken while the one pass over the trace goes by, instead of by a
// second pass that replays the trace up to the peak.
//
// A peak is known to be one only once it is over: a new peak stays pending while the events that follow
// certainly raise it again (MemoryModel::raises_peak_allocated: an allocation on top of the peak), and
// the snapshot is taken just before the first event that may not, while the state is still the peak's.
// A run of allocations that each set a new peak (a forward pass filling memory) costs one snapshot, at
// its end. A snapshot walks the live allocations, so a trace with many record peaks each broken by a
// free would cost O(events x live allocations): once the snapshots have walked more than kBudgetSlack
// allocations plus kWalksPerEvent per event so far, capturing stops and every device is left to the
// replay. A walk costs a few tens of instructions per allocation, an event about a thousand (decoding
// included): the budget bounds the loss of a trace that gives up to a few percent of one pass, while
// a leak that sets a record every step in a training loop (examples/train_leak.mtrace: 0.56
// allocations walked per event) stays within it. A snapshot holds one device's call sites: memory
// stays bounded by the live set.
//
// Whether the trace ever shows a PyTorch allocator layer on the device, which changes what the
// fragmentation means, is known only at the end (the replay gets it as a hint): a snapshot taken
// before the layer appeared keeps the fragmentation both ways. Whether it shows a block layer needs no
// such care: once seen, it stays, and the peak that counts is then the blocks' peak, which comes after.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "model/memory_model.h"
#include "model/replay.h"
#include "stacks/call_sites.h"
#include "util/flat_hash_map.h"

namespace memtrace {

class PeakCapture {
 public:
  static constexpr uint64_t kBudgetSlack = 1 << 20;
  static constexpr uint64_t kWalksPerEvent = 1;

  explicit PeakCapture(const MemoryModel& model) : model_(model) {}

  // Call with each event just before the model applies it, and just after.
  void before_event(const EventFields& event) {
    if (has_pending_) settle_pending(event);
  }
  void after_event() {
    // Nearly every event neither raises a peak nor settles a prediction: then there is nothing to do
    // (after giving up, expecting_raise_ stays false and after_applied() returns at once).
    if (expecting_raise_ || model_.allocated_peak_raised()) after_applied();
  }

  // Call after the model applied a LiveAtAttach or AttachBaseline record (before the first event, as the tracer
  // writes them): a peak it raised is the peak of the moment before the next event (Peak::at_attach),
  // snapshotted before that event is applied, unless it certainly raises the peak again.
  void after_attach_record() {
    if (gave_up_ || !model_.allocated_peak_raised()) return;
    for (const DeviceState* state : model_.devices_touched()) {
      const Peak& peak = state->peak_allocated();
      if (peak.at_attach && peak.event_index == model_.next_event_index() && peak.bytes > 0)
        note_peak(state->device, ReplayMoment::of(peak));
    }
  }

  // After the last event: the call sites live at each device's peak allocated and the fragmentation
  // there, for the devices whose peak was captured; with `outside_at_peak`, also the device's driver-layer
  // allocations live there that never held a PyTorch block (is_outside_candidate), by stack. Returns the
  // devices with a peak (bytes > 0) that was not: a replay has to find those.
  std::vector<int32_t> finish(std::map<int32_t, std::vector<CallSite>>& live_at_peak,
                              std::map<int32_t, Fragmentation>& fragmentation_at_peak,
                              std::map<int32_t, std::vector<CallSite>>* outside_at_peak = nullptr);

  // Whether `a`, live on `state`'s device, is driver-layer device memory that is not of the allocated kind and
  // never held a PyTorch block: what the peak breakdown sorts by layer (peak_breakdown.h).
  static bool is_outside_candidate(const DeviceState& state, const LiveAllocation& a) {
    return a.device == state.device && !is_block_space(a.space) && a.charged_to_device() && !a.held_blocks &&
           !state.counts_as_allocated(a);
  }

  // Allocations walked by snapshots so far (for tests of the budget).
  uint64_t allocations_walked() const { return walked_; }
  bool gave_up() const { return gave_up_; }

 private:
  struct Pending {
    int32_t device = 0;
    ReplayMoment moment;        // the peak's
    bool expect_raise = false;  // the event being applied was predicted to raise the peak again
  };
  struct Snapshot {
    ReplayMoment moment;
    std::vector<CallSite> sites;    // not sorted (only the last snapshot of a device is)
    std::vector<CallSite> outside;  // is_outside_candidate allocations, one entry per stack
    Fragmentation with_allocator_layer;
    Fragmentation without_allocator_layer;
  };

  void settle_pending(const EventFields& event);
  // after_event() for an event that raised a peak or was predicted to.
  void after_applied();
  void drop_unraised(uint64_t last);
  void note_peak(int32_t device, ReplayMoment moment);
  void capture(const Pending& pending);

  const MemoryModel& model_;
  std::vector<Pending> pending_;  // at most one per device
  // !pending_.empty(), kept after every change of pending_: one test of a byte per event, not a
  // comparison of the vector's two ends.
  bool has_pending_ = false;
  bool expecting_raise_ = false;  // some Pending has expect_raise
  std::map<int32_t, Snapshot> snapshots_;
  struct SiteTotals {
    uint64_t bytes = 0;
    uint64_t count = 0;
  };
  struct StackHash {
    uint64_t operator()(uint64_t stack_id) const { return stack_id; }
  };
  FlatHashMap<uint64_t, SiteTotals, StackHash> by_stack_;  // scratch of capture(), kept for its capacity
  uint64_t walked_ = 0;
  bool gave_up_ = false;
};

}  // namespace memtrace
