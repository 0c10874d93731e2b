// A hash table that stores its entries in one array: the memory model looks up an allocation for almost
// every event, and a node-based std::unordered_map costs a malloc and a free per insert/erase pair plus
// a pointer chase per lookup (docs/performance.md, "Where the time goes").
//
// Design: open addressing with linear probing over a power-of-two array of slots, at most half full, so
// that a lookup usually reads one slot and an absent key stops at the first empty slot. The slot of a key
// is the top bits of hash(key) * 2^64/phi (Fibonacci hashing), which spreads keys that differ only in
// high or aligned bits, as device addresses do, over the whole array. Erase moves the following entries
// of the probe run back into the hole (backward shift) instead of leaving a tombstone, so a table that
// sees endless insert/erase churn never fills with dead slots and probe runs stay as short as the load
// makes them. The array doubles when half full and never shrinks: memory follows the most entries held
// at once, not the number of operations.
//
// Any insert or erase may move entries: pointers returned by find/try_emplace are valid until the next
// insert or erase. Iteration order is the slot order: deterministic for a given sequence of operations,
// but not meaningful.
//
// Why not Abseil's absl::flat_hash_map (Debian libabsl-dev 20220623): behind this same interface (absl::Hash
// over the key's hash), `memtrace summary` took 636 instructions per event instead of 577 (bench/analyzer_speed,
// INSTRUCTIONS=1) and ran at a median 25 M instead of 33 M events per CPU second (10 M events, 5 runs); the fast
// path of the memory model needs to know that an insert will not grow the array, which absl does not say (its
// erase leaves tombstones that use up room). Absl's table took less memory (peak RSS 31.9 MiB instead of 36.7 in
// bench/analyzer_rss: 7/8 full at most, not 1/2), which does not outweigh a tenth more work per event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memtrace {

// `Hash` returns a uint64_t; it need not mix its bits (the table does). `Key` needs ==.
template <typename Key, typename Value, typename Hash>
class FlatHashMap {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  Value* find(const Key& key) {
    if (size_ == 0) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.full) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  const Value* find(const Key& key) const { return const_cast<FlatHashMap*>(this)->find(key); }

  // Inserts `value` under `key` unless the key is present. Returns the entry's value and whether it was
  // inserted (false: the existing value, unchanged). Always inlined: the memory model calls it for
  // nearly every event, and a call saving and restoring registers costs about half of a probe.
  [[gnu::always_inline]] std::pair<Value*, bool> try_emplace(const Key& key, const Value& value) {
    if (!can_insert_without_growing()) [[unlikely]]
      grow();
    return try_emplace_without_growing(key, value);
  }
  // Whether an insert now leaves the array as it is (try_emplace_without_growing may be called).
  bool can_insert_without_growing() const { return size_ < max_size_; }
  // try_emplace() where can_insert_without_growing(): no call to grow, for a caller that makes none.
  [[gnu::always_inline]] std::pair<Value*, bool> try_emplace_without_growing(const Key& key, const Value& value) {
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.full) break;
      if (s.key == key) return {&s.value, false};
    }
    slots_[i] = Slot{key, value, true};
    ++size_;
    return {&slots_[i].value, true};
  }

  // Removes `key`; false if it was not there.
  bool erase(const Key& key) {
    if (size_ == 0) return false;
    size_t hole = home(key);
    for (;; hole = (hole + 1) & mask_) {
      if (!slots_[hole].full) return false;
      if (slots_[hole].key == key) break;
    }
    // Backward shift: an entry after the hole moves into it unless its home slot lies cyclically in
    // (hole, j], where a lookup for it would start after the hole and still find it.
    for (size_t j = (hole + 1) & mask_; slots_[j].full; j = (j + 1) & mask_) {
      size_t k = home(slots_[j].key);
      bool stays = hole < j ? (hole < k && k <= j) : (hole < k || k <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole].full = false;
    --size_;
    return true;
  }

  void clear() {
    for (Slot& s : slots_) s.full = false;
    size_ = 0;
  }

  // Calls visit(key, value) for every entry, in slot order. `visit` must not insert or erase.
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (const Slot& s : slots_)
      if (s.full) visit(s.key, s.value);
  }

  // Slots allocated (for tests of the growth rule).
  size_t capacity() const { return slots_.size(); }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool full = false;
  };
  static constexpr size_t kMinSlots = 16;
  static constexpr uint64_t kFibonacci = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd

  size_t home(const Key& key) const { return size_t((Hash{}(key)*kFibonacci) >> shift_); }

  [[gnu::noinline]] void grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t slots = old.empty() ? kMinSlots : 2 * old.size();
    slots_.assign(slots, Slot{});
    mask_ = slots - 1;
    max_size_ = slots / 2;
    shift_ = 64 - __builtin_ctzll(slots);
    size_ = 0;
    for (const Slot& s : old)
      if (s.full) try_emplace(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t mask_ = 0;
  // Entries held before an insert grows the array: half its slots (0 before the first insert). Kept
  // rather than computed from the vector's ends: about 4 instructions fewer per insert.
  size_t max_size_ = 0;
  int shift_ = 64;
};

}  // namespace memtrace
