// The allocations the memory model holds live, found by (address space, address), and the keys freed
// since they were last allocated, which tell a double free from a free of an address never seen.
//
// One FlatHashMap entry per key says where the allocation is (a slot of a pool array) or that the key
// was freed: an ALLOC or FREE is one probe whatever the key's past, and no event allocates memory once
// the arrays have grown to the largest live set. Freed slots of the pool are reused last-freed first.
// Iteration (context destroy, snapshots, fragmentation) walks the pool, not the hash array.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/live_allocation.h"
#include "util/flat_hash_map.h"

namespace memtrace {

class LiveTable {
  struct Entry;  // where the index keeps a key (below)

 public:
  // At most `max_freed_remembered` freed keys are kept, so that a trace with endlessly new addresses
  // cannot grow the table without limit; past that, frees are not remembered (a later double free of
  // such a key counts as a free of an unknown address).
  explicit LiveTable(size_t max_freed_remembered) : max_freed_(max_freed_remembered) {}

  // The live allocation at (space, address), or null. Valid until the next insert.
  LiveAllocation* find(AddressSpace space, uint64_t address) {
    const Entry* e = index_.find(Key{address, space});
    return e && !e->freed ? &pool_[e->slot].allocation : nullptr;
  }
  const LiveAllocation* find(AddressSpace space, uint64_t address) const {
    return const_cast<LiveTable*>(this)->find(space, address);
  }
  // A live allocation and its index entry, for ending it without a second probe (erase(Found)).
  class Found {
   public:
    explicit operator bool() const { return entry_ != nullptr; }  // set with allocation_: one test, not two
    LiveAllocation& operator*() const { return *allocation_; }
    LiveAllocation* operator->() const { return allocation_; }

   private:
    friend class LiveTable;
    LiveAllocation* allocation_ = nullptr;
    Entry* entry_ = nullptr;
  };
  // find(), keeping where the index holds the key. Valid until the next insert or erase.
  Found find_entry(AddressSpace space, uint64_t address) {
    Found f;
    Entry* e = index_.find(Key{address, space});
    if (e && !e->freed) {
      f.allocation_ = &pool_[e->slot].allocation;
      f.entry_ = e;
    }
    return f;
  }

  // Whether (space, address) was freed, and not allocated again since (as far as remembered).
  bool was_freed(AddressSpace space, uint64_t address) const {
    const Entry* e = index_.find(Key{address, space});
    return e && e->freed;
  }

  // Adds `a` and returns null, unless an allocation is live at its key: then nothing changes and that
  // allocation is returned (the caller erases it and inserts again). A freed mark at the key is forgotten.
  const LiveAllocation* insert(const LiveAllocation& a) {
    auto [entry, inserted] = emplace_for_overwrite(a.space, a.address);
    if (!inserted) return entry;
    *entry = a;
    return nullptr;
  }
  // insert() for a caller that fills the allocation in place, without a copy: returns the new entry
  // (space and address set, the rest as a default LiveAllocation) and true, or the allocation live at
  // the key and false, having changed nothing. Inlined, as erase: one or the other runs for nearly
  // every event.
  [[gnu::always_inline]] std::pair<LiveAllocation*, bool> emplace(AddressSpace space, uint64_t address) {
    auto [a, inserted] = emplace_for_overwrite(space, address);
    if (inserted) *a = LiveAllocation{.space = space, .address = address};
    return {a, inserted};
  }
  // emplace() for a caller that then assigns the whole allocation (its space and address those given
  // here): the new entry holds whatever its slot held before. The default contents emplace() stores
  // first were dead stores the compiler kept (about 6 instructions per ALLOC on the fast path).
  [[gnu::always_inline]] std::pair<LiveAllocation*, bool> emplace_for_overwrite(AddressSpace space, uint64_t address) {
    if (last_freed_slot_ == kNoSlot && pool_end_ == pool_.size()) grow_pool();
    return emplace_in_pool(index_.try_emplace(Key{address, space}, Entry{}));
  }
  // Whether emplace_without_growing() may be called: the index takes one more key without growing its
  // array, and the pool has a slot to give (a freed one, or room never used).
  bool can_emplace_without_growing() const {
    return (last_freed_slot_ != kNoSlot || pool_end_ < pool_.size()) && index_.can_insert_without_growing();
  }
  // emplace_for_overwrite() where can_emplace_without_growing(): the same result and state, and no call
  // (the memory model's fast path makes none; it leaves a table that has to grow to the general path).
  [[gnu::always_inline]] std::pair<LiveAllocation*, bool> emplace_without_growing(AddressSpace space,
                                                                                  uint64_t address) {
    return emplace_in_pool(index_.try_emplace_without_growing(Key{address, space}, Entry{}));
  }

  // Ends the live allocation `a` (as returned by find), remembering its key as freed while fewer than
  // the limit are remembered. `a` is invalid afterwards.
  void erase(const LiveAllocation& a) { erase(a, index_.find(Key{a.address, a.space})); }
  // The same for an allocation found by find_entry (and nothing inserted or erased since). Inlined:
  // the memory model's fast path ends a block with it for nearly every FREE.
  [[gnu::always_inline]] void erase(Found f) { erase(*f.allocation_, f.entry_); }
  // Whether the next erase remembers its key as freed (erase_remembered() may be called then).
  bool remembers_next_free() const { return freed_ < max_freed_; }
  // erase(Found) where remembers_next_free(): the same, and no call (the index keeps the key).
  [[gnu::always_inline]] void erase_remembered(Found f) {
    f.entry_->freed = true;
    ++freed_;
    free_slot(f.entry_->slot);
  }

  size_t size() const { return live_; }
  size_t freed_remembered() const { return freed_; }

  // Calls visit(const LiveAllocation&) for every live allocation, in pool order. `visit` must not
  // insert or erase.
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (size_t i = 0; i < pool_end_; ++i)
      if (pool_[i].used) visit(pool_[i].allocation);
  }

 private:
  // `e` is the index entry of the live allocation `a`.
  [[gnu::always_inline]] void erase(const LiveAllocation& a, Entry* e) {
    uint32_t slot = e->slot;
    if (remembers_next_free()) {
      e->freed = true;
      ++freed_;
    } else {
      index_.erase(Key{a.address, a.space});
    }
    free_slot(slot);
  }
  // Puts `slot` at the head of the free slots' list.
  [[gnu::always_inline]] void free_slot(uint32_t slot) {
    PoolSlot& s = pool_[slot];
    s.used = false;
    s.freed_before = last_freed_slot_;
    last_freed_slot_ = slot;
    --live_;
  }

  struct Key {
    uint64_t address = 0;
    AddressSpace space = AddressSpace::kDriverPointer;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    // The space goes into the top bits, which the table's multiply carries into the slot number.
    uint64_t operator()(const Key& k) const { return k.address ^ (uint64_t(k.space) << 61); }
  };
  struct Entry {
    uint32_t slot = 0;   // index in pool_ when live
    bool freed = false;  // freed since its last allocation: no slot
  };
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  static constexpr size_t kMinPoolSlots = 64;
  // The slot a new allocation takes: the last freed, else the first never used (pool_end_, which
  // grow_pool has made room for).
  uint32_t next_slot() const { return last_freed_slot_ != kNoSlot ? last_freed_slot_ : uint32_t(pool_end_); }
  // The rest of an emplace, given the index's try_emplace of the key with a placeholder Entry: the
  // allocation live at the key if there is one (nothing changed); else the key's entry points at
  // next_slot() (a freed mark there forgotten), which leaves the free list or the unused room, and is
  // returned. The slot is chosen after the probe, not before: a register fewer through it, which the
  // memory model's fast path needs.
  [[gnu::always_inline]] std::pair<LiveAllocation*, bool> emplace_in_pool(std::pair<Entry*, bool> emplaced) {
    auto [entry, inserted] = emplaced;
    if (!inserted) {
      if (!entry->freed) return {&pool_[entry->slot].allocation, false};
      --freed_;
    }
    uint32_t slot = next_slot();
    *entry = Entry{slot, false};
    if (slot == last_freed_slot_) {
      last_freed_slot_ = pool_[slot].freed_before;
    } else {
      ++pool_end_;
    }
    PoolSlot& s = pool_[slot];
    s.used = true;
    ++live_;
    return {&s.allocation, true};
  }
  // Room for more slots than used so far: doubled, so that growing is amortized O(1) per allocation.
  [[gnu::noinline]] void grow_pool() { pool_.resize(std::max(kMinPoolSlots, 2 * pool_.size())); }
  // The free slots are a list threaded through the slots themselves (in the padding after `used`), last
  // freed first: freeing and reusing a slot are two stores, with no vector to grow.
  struct PoolSlot {
    LiveAllocation allocation;
    bool used = false;
    uint32_t freed_before = kNoSlot;  // when not used: the slot freed before this one, or kNoSlot
  };

  FlatHashMap<Key, Entry, KeyHash> index_;
  // Slots [0, pool_end_) have been used (live, or on the free list); those after are room not used yet.
  std::vector<PoolSlot> pool_;
  size_t pool_end_ = 0;
  uint32_t last_freed_slot_ = kNoSlot;  // head of the free slots' list
  size_t live_ = 0;
  size_t freed_ = 0;
  size_t max_freed_;
};

}  // namespace memtrace
