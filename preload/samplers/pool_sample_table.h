// The tracer's table of the last reserved-memory sample of each stream-ordered pool (pool_sampler.h), kept
// apart so that its rules can be tested without CUDA.
#pragma once
#include <cstdint>

namespace memtrace {

// The table of last samples, one slot per pool (pool handle and device: the graph pool of each device is
// handle 0 of that device). Fixed size, no allocation. Not thread-safe by itself: the sampler guards it
// with a spinlock that is never held while calling CUDA.
class PoolSampleTable {
 public:
  static constexpr int kSlots = 64;

  // Whether (pool, device) has a slot: a sample has been recorded for it.
  bool contains(uint64_t pool, int device) const;
  // Records `bytes` as the latest sample of (pool, device). True when it must be written: the first sample
  // of the pool, or a value different from the previous one. False too when the table is full and the pool
  // has no slot (the pool is then not sampled; 64 live pools is far beyond what programs create), and, with
  // `add` false, when the pool has no slot (a synchronization's sample of a pool destroyed meanwhile by
  // another thread must not bring it back).
  bool update(uint64_t pool, int device, uint64_t bytes, bool add = true);
  // The device recorded for `pool` (the first one found when it is on several devices), -1 when unknown.
  int device_of(uint64_t pool) const;
  // Frees the slot of `pool` on every device. Returns how many slots it had.
  int remove(uint64_t pool);
  // The pools (not graph pools) in the table, for sampling at a synchronization: up to `max` of them.
  int pools(uint64_t* handles, int* devices, int max) const;
  int size() const { return used_; }

 private:
  struct Slot {
    bool used;
    uint64_t pool;
    int device;
    uint64_t bytes;
  };
  Slot* find(uint64_t pool, int device);
  const Slot* find(uint64_t pool, int device) const;
  Slot slots_[kSlots] = {};
  int used_ = 0;
};

}  // namespace memtrace
