// The time of the first successful allocation from each call site (device, stack id), freed or not: the
// leak report measures a site's growth from it (call_sites.h, find_leak_sites).
//
// Nearly every ALLOC of a PyTorch trace asks whether its call site is new. The tracer numbers stacks
// 1, 2, 3... in the order it first sees them (preload/stacks/intern_table.h; memtrace.proto: ids are never
// reused), so a device's times are an array indexed by stack id: one bounds test and one load per ALLOC
// instead of a hash probe. Stack ids come from the file, though: ids at or past kMaxDenseStackId (only a
// damaged or hostile trace has a million distinct stacks) go to a hash table instead, so that one huge id
// cannot make the array huge (and a budget shared by the devices' arrays, past which an array stops growing,
// bounds them together). The array grows to the largest id below that limit seen on the device:
// at most 16 MiB per device, at least kMinArraySize ids (16 KiB) once it has one: the memory model's
// fast path leaves an id past the array to its general path, which grows it, so few ids should be.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "util/flat_hash_map.h"

namespace memtrace {

// One device's first allocation times, by stack id.
class SiteFirstTimes {
 public:
  static constexpr uint64_t kMaxDenseStackId = 1 << 20;
  static constexpr uint64_t kMinArraySize = 1024;

  // Keeps `time_ns` as the first time of `stack_id` unless it has one already. The array grows by at
  // most `array_entries_left` entries (taken from it): one shared by several devices' tables bounds
  // their arrays together. A growth past it leaves this array as it is for good, ids past it going to
  // the hash table.
  void note(uint64_t stack_id, int64_t time_ns, uint64_t& array_entries_left) {
    if (in_array(stack_id)) [[likely]] {
      note_in_array(stack_id, time_ns);
      return;
    }
    note_beyond_array(stack_id, time_ns, array_entries_left);
  }
  void note(uint64_t stack_id, int64_t time_ns) {
    uint64_t unlimited = UINT64_MAX;
    note(stack_id, time_ns, unlimited);
  }
  // Whether `stack_id` has an entry in the array as it is now: note_in_array() may be called.
  bool in_array(uint64_t stack_id) const { return stack_id < dense_size_; }
  // note() for an id in_array(): no call, for a caller that makes none.
  void note_in_array(uint64_t stack_id, int64_t time_ns) {
    Time& t = dense_[stack_id];
    if (!t.seen) t = Time{time_ns, true};
  }

  // The first time of `stack_id`, or null if it has none.
  const int64_t* find(uint64_t stack_id) const {
    if (stack_id < dense_.size()) return dense_[stack_id].seen ? &dense_[stack_id].time_ns : nullptr;
    return sparse_.find(stack_id);
  }

  // Calls visit(stack_id, time_ns) for every stack id with a time, in no meaningful order.
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (size_t id = 0; id < dense_.size(); ++id)
      if (dense_[id].seen) visit(uint64_t(id), dense_[id].time_ns);
    sparse_.for_each([&](uint64_t id, int64_t ns) { visit(id, ns); });
  }

  // Entries of the array (for tests of where an id goes).
  size_t array_size() const { return dense_.size(); }

 private:
  // `seen` rather than a reserved time value: every int64_t is a possible time (times saturate).
  struct Time {
    int64_t time_ns = 0;
    bool seen = false;
  };
  struct IdHash {
    uint64_t operator()(uint64_t stack_id) const { return stack_id; }
  };

  [[gnu::noinline]] void note_beyond_array(uint64_t stack_id, int64_t time_ns, uint64_t& array_entries_left) {
    // Doubling keeps the growth of a trace whose ids rise one by one amortized O(1) per id.
    uint64_t size =
        std::min<uint64_t>(kMaxDenseStackId, std::max({stack_id + 1, 2 * uint64_t(dense_.size()), kMinArraySize}));
    if (stack_id < dense_limit_ && size - dense_.size() > array_entries_left) {
      // No room: the array stays as it is, so that every id in sparse_ stays at or past its end (find()
      // looks for an id in one place only).
      dense_limit_ = dense_.size();
    }
    if (stack_id >= dense_limit_) {
      sparse_.try_emplace(stack_id, time_ns);
      return;
    }
    array_entries_left -= size - dense_.size();
    dense_.resize(size);
    dense_size_ = dense_.size();
    dense_[stack_id] = Time{time_ns, true};
  }

  std::vector<Time> dense_;
  size_t dense_size_ = 0;  // dense_.size(), kept: note() tests it without two loads, a subtraction and a shift
  // The array grows to hold ids below this: kMaxDenseStackId, or its size once a growth was refused.
  uint64_t dense_limit_ = kMaxDenseStackId;
  FlatHashMap<uint64_t, int64_t, IdHash> sparse_;  // ids at or past dense_limit_
};

}  // namespace memtrace
