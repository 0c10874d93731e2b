// The memory model's flat tables: FlatHashMap (probing, backward-shift erase, growth), LiveTable (live
// and freed keys, slot reuse) and BlockIndex (logged changes, rebuild past the log), with hand-worked
// expectations, largest_free_block_bytes over a sorted block vector, and SiteFirstTimes (an array by
// stack id, a hash table past its limit).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

#include "model/block_index.h"
#include "model/first_allocation_times.h"
#include "model/live_table.h"
#include "model/segment_map.h"
#include "util/flat_hash_map.h"

namespace memtrace {
namespace {

// Every key hashes to 0: home slot 0, so keys sit in insertion order in slots 0, 1, 2, ...
struct ZeroHash {
  uint64_t operator()(uint64_t) const { return 0; }
};

// The multiplicative inverse of the table's multiplier 0x9E3779B97F4A7C15 mod 2^64 (Newton's iteration
// x <- x (2 - k x) doubles the correct low bits each step; k is its own inverse mod 8, so 5 steps give 96).
constexpr uint64_t inverse_of_multiplier() {
  uint64_t k = 0x9E3779B97F4A7C15ull, x = k;
  for (int i = 0; i < 5; ++i) x *= 2 - k * x;
  return x;
}
// Every key hashes to the value whose product with the multiplier is 0xF000...0: in a 16-slot table
// (top 4 bits) that is slot 15, the last one, so the second key wraps around to slot 0.
struct LastSlotHash {
  uint64_t operator()(uint64_t) const { return 0xF000000000000000ull * inverse_of_multiplier(); }
};

template <typename Map>
std::vector<uint64_t> keys_in_slot_order(const Map& m) {
  std::vector<uint64_t> keys;
  m.for_each([&](uint64_t key, int) { keys.push_back(key); });
  return keys;
}

TEST(FlatHashMap, FindsInsertsAndErases) {
  FlatHashMap<uint64_t, int, std::hash<uint64_t>> m;
  EXPECT_EQ(m.find(7), nullptr);
  EXPECT_FALSE(m.erase(7));
  auto [v, inserted] = m.try_emplace(7, 70);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(*v, 70);
  auto [again, inserted_again] = m.try_emplace(7, 71);  // present: the old value stays
  EXPECT_FALSE(inserted_again);
  EXPECT_EQ(*again, 70);
  m.try_emplace(0x7f0000001000, 1);
  ASSERT_NE(m.find(0x7f0000001000), nullptr);
  EXPECT_EQ(*m.find(0x7f0000001000), 1);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_TRUE(m.erase(7));
  EXPECT_EQ(m.find(7), nullptr);
  EXPECT_EQ(m.size(), 1u);
}

TEST(FlatHashMap, EraseShiftsTheRestOfTheRunBack) {
  FlatHashMap<uint64_t, int, ZeroHash> m;
  for (uint64_t k = 1; k <= 5; ++k) m.try_emplace(k, int(k));
  EXPECT_EQ(keys_in_slot_order(m), (std::vector<uint64_t>{1, 2, 3, 4, 5}));  // slots 0..4
  // Erasing 2 (slot 1): 3, 4, 5 all have home 0, before the hole, so each moves back one slot.
  m.erase(2);
  EXPECT_EQ(keys_in_slot_order(m), (std::vector<uint64_t>{1, 3, 4, 5}));
  for (uint64_t k : {1, 3, 4, 5}) EXPECT_NE(m.find(k), nullptr) << k;
  EXPECT_EQ(m.find(2), nullptr);
  m.try_emplace(6, 6);  // the first empty slot of the run: slot 4
  EXPECT_EQ(keys_in_slot_order(m), (std::vector<uint64_t>{1, 3, 4, 5, 6}));
}

TEST(FlatHashMap, ProbeRunsWrapAroundTheEnd) {
  FlatHashMap<uint64_t, int, LastSlotHash> m;
  m.try_emplace(1, 1);  // slot 15
  m.try_emplace(2, 2);  // slot 15 is full: wraps to slot 0
  m.try_emplace(3, 3);  // slot 1
  EXPECT_EQ(m.capacity(), 16u);
  EXPECT_EQ(keys_in_slot_order(m), (std::vector<uint64_t>{2, 3, 1}));
  // Erasing 1 (slot 15): 2 (slot 0) and 3 (slot 1) have home 15, so both move back across the end.
  m.erase(1);
  EXPECT_EQ(keys_in_slot_order(m), (std::vector<uint64_t>{3, 2}));  // 2 in slot 15, 3 in slot 0
  EXPECT_NE(m.find(2), nullptr);
  EXPECT_NE(m.find(3), nullptr);
}

TEST(FlatHashMap, DoublesWhenMoreThanHalfFull) {
  FlatHashMap<uint64_t, int, std::hash<uint64_t>> m;
  EXPECT_EQ(m.capacity(), 0u);
  m.try_emplace(0, 0);
  EXPECT_EQ(m.capacity(), 16u);
  for (uint64_t k = 1; k < 8; ++k) m.try_emplace(k, 0);
  EXPECT_EQ(m.capacity(), 16u);  // 8 entries in 16 slots: half full
  m.try_emplace(8, 0);           // a 9th would make 2 * 9 = 18 > 16
  EXPECT_EQ(m.capacity(), 32u);
  for (uint64_t k = 0; k <= 8; ++k) EXPECT_NE(m.find(k), nullptr) << k;
}

// A long random sequence of inserts and erases over a small key range (so that runs collide and
// erases shift), checked against std::unordered_map after every operation.
TEST(FlatHashMap, AgreesWithUnorderedMapUnderChurn) {
  FlatHashMap<uint64_t, uint64_t, std::hash<uint64_t>> m;
  std::unordered_map<uint64_t, uint64_t> reference;
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    uint64_t key = (rng() % 512) << 12;  // aligned, as device addresses are
    if (rng() % 2) {
      EXPECT_EQ(m.try_emplace(key, uint64_t(i)).second, reference.try_emplace(key, uint64_t(i)).second);
    } else {
      EXPECT_EQ(m.erase(key), reference.erase(key) == 1);
    }
    ASSERT_EQ(m.size(), reference.size());
  }
  for (uint64_t k = 0; k < 512; ++k) {
    auto it = reference.find(k << 12);
    const uint64_t* v = m.find(k << 12);
    ASSERT_EQ(v != nullptr, it != reference.end()) << k;
    if (v) EXPECT_EQ(*v, it->second);
  }
}

LiveAllocation allocation(AddressSpace space, uint64_t address, uint64_t size_bytes) {
  return LiveAllocation{.space = space, .size_bytes = size_bytes, .address = address};
}

TEST(LiveTable, RemembersFreedKeysUntilAllocatedAgain) {
  LiveTable t(/*max_freed_remembered=*/8);
  EXPECT_EQ(t.insert(allocation(AddressSpace::kTorchBlock, 0x1000, 100)), nullptr);
  // The same address in another space is another key.
  EXPECT_EQ(t.find(AddressSpace::kPoolBlock, 0x1000), nullptr);
  ASSERT_NE(t.find(AddressSpace::kTorchBlock, 0x1000), nullptr);
  EXPECT_EQ(t.find(AddressSpace::kTorchBlock, 0x1000)->size_bytes, 100u);
  t.erase(*t.find(AddressSpace::kTorchBlock, 0x1000));
  EXPECT_EQ(t.find(AddressSpace::kTorchBlock, 0x1000), nullptr);
  EXPECT_TRUE(t.was_freed(AddressSpace::kTorchBlock, 0x1000));
  EXPECT_FALSE(t.was_freed(AddressSpace::kPoolBlock, 0x1000));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.freed_remembered(), 1u);
  EXPECT_EQ(t.insert(allocation(AddressSpace::kTorchBlock, 0x1000, 200)), nullptr);
  EXPECT_FALSE(t.was_freed(AddressSpace::kTorchBlock, 0x1000));
  EXPECT_EQ(t.freed_remembered(), 0u);
  EXPECT_EQ(t.find(AddressSpace::kTorchBlock, 0x1000)->size_bytes, 200u);
}

TEST(LiveTable, InsertAtALiveKeyReturnsTheLiveAllocationAndChangesNothing) {
  LiveTable t(8);
  t.insert(allocation(AddressSpace::kDriverPointer, 0x2000, 10));
  const LiveAllocation* old = t.insert(allocation(AddressSpace::kDriverPointer, 0x2000, 20));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->size_bytes, 10u);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.find(AddressSpace::kDriverPointer, 0x2000)->size_bytes, 10u);
}

TEST(LiveTable, StopsRememberingFreedKeysAtTheLimit) {
  LiveTable t(/*max_freed_remembered=*/1);
  t.insert(allocation(AddressSpace::kDriverPointer, 0xA000, 1));
  t.insert(allocation(AddressSpace::kDriverPointer, 0xB000, 1));
  t.erase(*t.find(AddressSpace::kDriverPointer, 0xA000));  // remembered: 1 of 1
  t.erase(*t.find(AddressSpace::kDriverPointer, 0xB000));  // over the limit: forgotten
  EXPECT_TRUE(t.was_freed(AddressSpace::kDriverPointer, 0xA000));
  EXPECT_FALSE(t.was_freed(AddressSpace::kDriverPointer, 0xB000));
  EXPECT_EQ(t.freed_remembered(), 1u);
  // Allocating 0xA000 again forgets its mark, which makes room for the next free.
  t.insert(allocation(AddressSpace::kDriverPointer, 0xA000, 1));
  t.insert(allocation(AddressSpace::kDriverPointer, 0xC000, 1));
  t.erase(*t.find(AddressSpace::kDriverPointer, 0xC000));
  EXPECT_TRUE(t.was_freed(AddressSpace::kDriverPointer, 0xC000));
}

TEST(LiveTable, IteratesInPoolOrderReusingTheLastFreedSlot) {
  LiveTable t(8);
  for (uint64_t a : {0xA0, 0xB0, 0xC0}) t.insert(allocation(AddressSpace::kPoolBlock, a, 1));  // slots 0, 1, 2
  t.erase(*t.find(AddressSpace::kPoolBlock, 0xB0));                                            // frees slot 1
  t.insert(allocation(AddressSpace::kPoolBlock, 0xD0, 1));                                     // takes slot 1
  std::vector<uint64_t> order;
  t.for_each([&](const LiveAllocation& a) { order.push_back(a.address); });
  EXPECT_EQ(order, (std::vector<uint64_t>{0xA0, 0xD0, 0xC0}));
}

TEST(LiveTable, ReusesFreedSlotsLastFreedFirstThenGrows) {
  LiveTable t(8);
  for (uint64_t a : {0xA0, 0xB0, 0xC0, 0xD0}) t.insert(allocation(AddressSpace::kPoolBlock, a, 1));  // slots 0-3
  for (uint64_t a : {0xB0, 0xD0, 0xA0}) t.erase(*t.find(AddressSpace::kPoolBlock, a));               // frees 1, 3, 0
  // Slots taken in the reverse order of their frees: 0, 3, 1; then a new slot 4.
  for (uint64_t a : {0x10, 0x20, 0x30, 0x40}) t.insert(allocation(AddressSpace::kPoolBlock, a, 1));
  std::vector<uint64_t> order;
  t.for_each([&](const LiveAllocation& a) { order.push_back(a.address); });
  // slot 0: 0x10, 1: 0x30, 2: 0xC0, 3: 0x20, 4: 0x40.
  EXPECT_EQ(order, (std::vector<uint64_t>{0x10, 0x30, 0xC0, 0x20, 0x40}));
  EXPECT_EQ(t.size(), 5u);
}

TEST(BlockIndex, AppliesLoggedChangesInOrder) {
  BlockIndex index;
  int rebuilds = 0;
  auto rebuild = [&](std::vector<Block>&) { ++rebuilds; };
  index.add(0x3000, 30);
  index.add(0x1000, 10);
  index.add(0x2000, 20);
  EXPECT_EQ(index.sorted(rebuild), (std::vector<Block>{{0x1000, 10}, {0x2000, 20}, {0x3000, 30}}));
  // Removed then added again with another size before the next request: the log replays both.
  index.remove(0x2000);
  index.add(0x2000, 25);
  index.remove(0x1000);
  EXPECT_EQ(index.sorted(rebuild), (std::vector<Block>{{0x2000, 25}, {0x3000, 30}}));
  EXPECT_EQ(rebuilds, 0);
}

TEST(BlockIndex, RebuildsFromTheLiveSetPastTheLog) {
  BlockIndex index;
  // An empty list logs kMinLoggedChanges = 64 changes; the 65th drops the log.
  for (uint64_t i = 0; i <= BlockIndex::kMinLoggedChanges; ++i) index.add(0x1000 * (i + 1), 1);
  int rebuilds = 0;
  // The live set as the model would give it, in pool order, not sorted.
  auto rebuild = [&](std::vector<Block>& all) {
    ++rebuilds;
    all.push_back({0x9000, 9});
    all.push_back({0x4000, 4});
  };
  EXPECT_EQ(index.sorted(rebuild), (std::vector<Block>{{0x4000, 4}, {0x9000, 9}}));
  EXPECT_EQ(rebuilds, 1);
  index.remove(0x9000);  // logged again after the rebuild
  EXPECT_EQ(index.sorted(rebuild), (std::vector<Block>{{0x4000, 4}}));
  EXPECT_EQ(rebuilds, 1);
}

TEST(BlockIndex, RebuildSortsBlocksSetAsideFromTheAscendingRunAndMergesThem) {
  BlockIndex index;
  for (uint64_t i = 0; i <= BlockIndex::kMinLoggedChanges; ++i) index.add(0x1000 * (i + 1), 1);  // drops the log
  // Pool order: 0x2000, 0x5000, 0x6000, 0x7000 rise and stay; 0x1000, 0x3000 and 0x4000 come after a
  // higher address and are set aside; 0x8000 comes after 0x7000, above every one set aside.
  std::vector<Block> pool_order = {{0x2000, 2}, {0x5000, 5}, {0x1000, 1}, {0x6000, 6},
                                   {0x4000, 4}, {0x7000, 7}, {0x3000, 3}, {0x8000, 8}};
  EXPECT_EQ(
      index.sorted([&](std::vector<Block>& all) { all = pool_order; }),
      (std::vector<Block>{
          {0x1000, 1}, {0x2000, 2}, {0x3000, 3}, {0x4000, 4}, {0x5000, 5}, {0x6000, 6}, {0x7000, 7}, {0x8000, 8}}));
  // Descending: only the first stays, all the others are set aside.
  BlockIndex descending;
  for (uint64_t i = 0; i <= BlockIndex::kMinLoggedChanges; ++i) descending.add(0x1000 * (i + 1), 1);
  EXPECT_EQ(descending.sorted([](std::vector<Block>& all) {
    all = {{0x3000, 3}, {0x2000, 2}, {0x1000, 1}};
  }),
            (std::vector<Block>{{0x1000, 1}, {0x2000, 2}, {0x3000, 3}}));
}

TEST(BlockIndex, LogsAsManyChangesAsTheListHasBlocks) {
  BlockIndex index;
  auto no_rebuild = [](std::vector<Block>&) { FAIL() << "rebuilt"; };
  for (uint64_t i = 0; i < 50; ++i) index.add(0x100 * (i + 1), 1);  // 50 logged: under 64
  ASSERT_EQ(index.sorted(no_rebuild).size(), 50u);
  for (uint64_t i = 0; i < 50; ++i) index.add(0x100 * (i + 51), 1);  // 50 more
  ASSERT_EQ(index.sorted(no_rebuild).size(), 100u);
  // 100 blocks listed: 100 changes are logged (remove every odd one, then re-add them with size 2);
  // the list keeps the even ones with size 1 and the odd ones with size 2.
  for (uint64_t i = 1; i <= 100; i += 2) index.remove(0x100 * i);
  for (uint64_t i = 1; i <= 100; i += 2) index.add(0x100 * i, 2);
  const std::vector<Block>& blocks = index.sorted(no_rebuild);
  ASSERT_EQ(blocks.size(), 100u);
  for (uint64_t i = 1; i <= 100; ++i) EXPECT_EQ(blocks[i - 1], (Block{0x100 * i, i % 2 ? 2u : 1u})) << i;
  // A 101st change past 100 logged ones drops the log.
  int rebuilds = 0;
  for (uint64_t i = 1; i <= 101; ++i) index.remove(0x100 * i);
  index.sorted([&](std::vector<Block>&) { ++rebuilds; });
  EXPECT_EQ(rebuilds, 1);
}

TEST(SegmentMap, LargestFreeBlockOverASortedVectorAsOverAMap) {
  // Segment [0x1000, 0x3000) with blocks [0x1000, 0x1400) and [0x2000, 0x2800): gaps 0x2000 - 0x1400 =
  // 0xC00 and 0x3000 - 0x2800 = 0x800, so 0xC00. Segment [0x8000, 0x8800) has no block: 0x800.
  std::vector<AddressRange> segments = {{0x1000, 0x3000}, {0x8000, 0x8800}};
  std::vector<Block> blocks = {{0x1000, 0x400}, {0x2000, 0x800}, {0x5000, 0x100000}};  // the last in no segment
  std::map<uint64_t, uint64_t> as_map = {{0x1000, 0x400}, {0x2000, 0x800}, {0x5000, 0x100000}};
  EXPECT_EQ(largest_free_block_bytes(segments, blocks), 0xC00u);
  EXPECT_EQ(largest_free_block_bytes(segments, as_map), 0xC00u);
}

std::map<uint64_t, int64_t> all_times(const SiteFirstTimes& times) {
  std::map<uint64_t, int64_t> all;
  times.for_each([&](uint64_t id, int64_t ns) { all.emplace(id, ns); });
  return all;
}

TEST(SiteFirstTimes, KeepsTheFirstTimeOfEachStackId) {
  SiteFirstTimes times;
  times.note(3, 100);
  times.note(1, 200);
  times.note(3, 300);  // not the first of stack 3
  times.note(0, 400);  // 0 = no stack: a call site like any other
  EXPECT_EQ(all_times(times), (std::map<uint64_t, int64_t>{{0, 400}, {1, 200}, {3, 100}}));
  ASSERT_NE(times.find(3), nullptr);
  EXPECT_EQ(*times.find(3), 100);
  EXPECT_EQ(times.find(2), nullptr);   // inside the array, never noted
  EXPECT_EQ(times.find(99), nullptr);  // past the array
  // The array grew at id 3 to max(3 + 1, 2 x 0, kMinArraySize) = 1024 entries, then stayed.
  EXPECT_EQ(times.array_size(), 1024u);
  times.note(1023, 500);  // the last id in it
  EXPECT_EQ(times.array_size(), 1024u);
  times.note(1024, 600);  // one past: doubles to max(1025, 2048, 1024) = 2048
  EXPECT_EQ(times.array_size(), 2048u);
  times.note(5000, 700);  // past the doubling: max(5001, 4096, 1024) = 5001
  EXPECT_EQ(times.array_size(), 5001u);
  EXPECT_EQ(*times.find(1024), 600);
}

TEST(SiteFirstTimes, EveryTimeValueCountsIncludingTheLowest) {
  // A saturated time (INT64_MIN) is a time, not "none": a later allocation must not replace it.
  SiteFirstTimes times;
  times.note(2, INT64_MIN);
  times.note(2, 7);
  ASSERT_NE(times.find(2), nullptr);
  EXPECT_EQ(*times.find(2), INT64_MIN);
}

TEST(SiteFirstTimes, IdsPastTheLimitGoToTheHashTableWithoutGrowingTheArray) {
  SiteFirstTimes times;
  constexpr uint64_t kLimit = SiteFirstTimes::kMaxDenseStackId;
  times.note(1, 10);
  times.note(uint64_t(1) << 62, 20);
  times.note(kLimit, 30);             // the first id past the array's limit
  times.note(kLimit - 1, 40);         // the last id the array takes: it grows to the limit, no further
  times.note(uint64_t(1) << 62, 50);  // not the first
  EXPECT_EQ(times.array_size(), kLimit);
  EXPECT_EQ(all_times(times),
            (std::map<uint64_t, int64_t>{{1, 10}, {kLimit - 1, 40}, {kLimit, 30}, {uint64_t(1) << 62, 20}}));
  EXPECT_EQ(*times.find(uint64_t(1) << 62), 20);
  EXPECT_EQ(times.find(kLimit + 1), nullptr);
}

}  // namespace
}  // namespace memtrace
