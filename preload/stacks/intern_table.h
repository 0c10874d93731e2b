// A fixed-capacity hash set that gives each distinct 64-bit key a small id, so that each distinct stack (and
// Python source position) is written to the trace once and events refer to it by id.
//
// Keys are 64-bit hashes of the content, not the content: with a good hash the chance that two of a million
// distinct stacks collide is about 3e-8, and the price of a collision is one stack shown for another, which
// is cheaper than keeping every stack in memory inside the traced process. The table never grows: its
// memory is mapped once (virtual memory, touched as it fills), and when it is 3/4 full `insert` refuses, so
// the tracer records the event with no stack instead of allocating without bound.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace memtrace {

class InternTable {
 public:
  // `capacity` must be a power of two. Returns false when the memory cannot be mapped.
  bool init(size_t capacity) {
    void* p = mmap(nullptr, capacity * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    slots_ = static_cast<Slot*>(p);
    mask_ = capacity - 1;
    return true;
  }

  // The id of `key`, or 0 when it is not in the table. Key 0 is reserved (mapped to 1 by callers' hashes).
  uint64_t find(uint64_t key) const {
    if (!slots_) return 0;
    for (size_t i = key & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].id;
      if (slots_[i].key == 0) return 0;
    }
  }

  // True when insert() would refuse: check before writing a record under the next id.
  bool full() const { return !slots_ || (used_ + 1) * 4 > (mask_ + 1) * 3; }

  // Adds `key` with the next id and returns that id; 0 when the table is full.
  uint64_t insert(uint64_t key) {
    if (full()) return 0;
    size_t i = key & mask_;
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i].key = key;
    slots_[i].id = ++used_;
    return used_;
  }

  // Forgets everything (used in a forked child, whose trace starts afresh).
  void clear() {
    if (slots_) memset_slots();
    used_ = 0;
  }

  // The id the next insert would return.
  uint64_t next_id() const { return used_ + 1; }

 private:
  struct Slot {
    uint64_t key;
    uint64_t id;
  };
  void memset_slots() {
    for (size_t i = 0; i <= mask_; i++) slots_[i] = Slot{0, 0};
  }
  Slot* slots_ = nullptr;
  size_t mask_ = 0;
  uint64_t used_ = 0;
};

// A direct-mapped cache of the ids an InternTable gave, in front of it: `kSlots` (a power of two) slots of 16
// bytes, each holding the last key seen that maps to it. Why: the stack table is 16 MiB, so each of a
// training step's call sites (186 distinct stacks in the GPT-2 loop of scripts/gpu-bench) sits on a page and
// cache line of its own; in that loop on the GPU machine, encoding and appending an event with a stack took
// about 140 ns per allocation more than without one (scripts/gpu-phase-cycles), which looks like a TLB or
// cache miss. The same entries in 64 KiB stay on 16 pages. Ids never change once given, so a slot is either
// the right id or a miss. Not thread-safe: the caller's lock guards it together with the table.
template <size_t kSlots>
class RecentIds {
  static_assert(kSlots != 0 && (kSlots & (kSlots - 1)) == 0, "kSlots must be a power of two");

 public:
  // The id remembered for `key` (never 0: key 0 is reserved), or 0.
  uint64_t find(uint64_t key) const {
    const Slot& s = slots_[key & (kSlots - 1)];
    return s.key == key ? s.id : 0;
  }
  void remember(uint64_t key, uint64_t id) { slots_[key & (kSlots - 1)] = Slot{key, id}; }
  // Starts loading `key`'s slot (find and remember touch that line only), for a caller that has other work to
  // do before it looks: after the job's own work between two events the slot is usually not in L1 or L2.
  void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[key & (kSlots - 1)], 1); }
  void clear() {
    for (Slot& s : slots_) s = Slot{0, 0};
  }

 private:
  struct Slot {
    uint64_t key;
    uint64_t id;
  };
  Slot slots_[kSlots] = {};
};

// 64-bit FNV-1a over bytes, then a final mix: fast, no table, good enough for interning keys.
inline uint64_t hash_bytes(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
inline uint64_t hash_u64(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}
// One cheap step for long sequences of 64-bit values (a stack's frames): a bijection of h for each v, so two
// sequences that differ in one value differ after it; finish with hash_u64 for the avalanche.
inline uint64_t hash_step(uint64_t h, uint64_t v) { return ((h ^ v) + 0x9e3779b97f4a7c15ULL) * 0xff51afd7ed558ccdULL; }
constexpr uint64_t kHashSeed = 0xcbf29ce484222325ULL;
inline uint64_t nonzero_key(uint64_t h) { return h ? h : 1; }

}  // namespace memtrace
