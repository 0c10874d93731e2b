// The fragmentation kept up to date event by event (BlockGapTree, SegmentFreeSpace, MemoryModel with
// set_incremental_fragmentation) against the walk it replaces for timeline rows: hand-worked layouts
// with overlapping blocks and segments, and random event sequences checked after every event against
// a model that walks (the numbers must be the walk's, damaged traces included).
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <sstream>

#include "model/memory_model.h"
#include "model/segment_map.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::driver_free;
using test::make_event;
using test::torch_event;

TEST(BlockGapTree, GapsFollowTheWalkWithOverlappingAndEmptyBlocks) {
  BlockGapTree tree;
  tree.insert(10, 20);  // [10,30)
  tree.insert(20, 5);   // [20,25): inside the one before
  tree.insert(40, 0);   // an empty block at 40 splits the gap around it
  tree.insert(60, 30);  // [60,90)
  // [0,100): head 10, 30->40 = 10, 40->60 = 20, tail 90->100 = 10
  EXPECT_EQ(tree.largest_gap({0, 100}), 20u);
  tree.insert(35, 65);  // [35,100) covers 40 and [60,90): gaps head 10, 30->35 = 5, no tail
  EXPECT_EQ(tree.largest_gap({0, 100}), 10u);
  tree.erase(10);  // head 0->20 = 20, 25->35 = 10
  EXPECT_EQ(tree.largest_gap({0, 100}), 20u);
  // [50,80): only [60,90) starts inside ([35,100) starts before it and is not looked at): head 10.
  EXPECT_EQ(tree.largest_gap({50, 80}), 10u);
  // No block starts in [200,300): one free block of 100.
  EXPECT_EQ(tree.largest_gap({200, 300}), 100u);
  tree.erase(12345);  // no block there: nothing changes
  EXPECT_EQ(tree.size(), 4u);
  // A block whose end would pass 2^64 ends at the top of the address space.
  tree.insert(UINT64_MAX - 10, 100);
  EXPECT_EQ(tree.largest_gap({UINT64_MAX - 20, UINT64_MAX}), 10u);
}

TEST(SegmentFreeSpace, OverlappingSegmentsEachCountTheirOwnGaps) {
  SegmentFreeSpace space;
  space.add_segment({0, 0}, {0, 100}, 0);      // A
  space.add_segment({50, 0}, {50, 150}, 0);    // B overlaps A
  space.add_segment({200, 1}, {200, 300}, 1);  // C, device 1
  // No blocks yet: A 100, B 100, C 100.
  EXPECT_EQ(space.segment_count(0), 2u);
  EXPECT_EQ(space.largest_free_block_bytes(0), 100u);
  space.add_block(60, 10);  // [60,70): A head 60 tail 30 -> 60; B head 10 tail 80 -> 80
  EXPECT_EQ(space.largest_free_block_bytes(0), 80u);
  space.add_block(210, 80);  // a block of any device counts in C: head 10, tail 10
  EXPECT_EQ(space.largest_free_block_bytes(1), 10u);
  space.remove_segment({50, 0});
  EXPECT_EQ(space.segment_count(0), 1u);
  EXPECT_EQ(space.largest_free_block_bytes(0), 60u);
  space.remove_block(60);
  EXPECT_EQ(space.largest_free_block_bytes(0), 100u);
  // A range that wraps (address + size past 2^64) is a segment with no free block.
  space.add_segment({UINT64_MAX - 5, 0}, {UINT64_MAX - 5, 10}, 1);
  EXPECT_EQ(space.segment_count(1), 2u);
  EXPECT_EQ(space.largest_free_block_bytes(1), 10u);
  space.remove_segment({UINT64_MAX - 5, 0});
  space.remove_segment({777, 0});  // not a segment: nothing changes
  EXPECT_EQ(space.segment_count(1), 1u);
  EXPECT_EQ(space.segment_count(2), 0u);
  EXPECT_EQ(space.largest_free_block_bytes(2), 0u);
}

// Random events over a small address range, so that segments, mappings and blocks collide, overlap
// and wrap: PyTorch blocks on two devices, cudaMalloc segments, VMM handles, mappings, reservations,
// context destroys.
class RandomEvents {
 public:
  explicit RandomEvents(uint64_t seed) : random_(seed) {}

  proto::Event next() {
    int32_t device = int32_t(pick(2));
    switch (pick(20)) {
      case 0:
      case 1:
      case 2: return driver_alloc(device, address(), segment_size());
      case 3: return driver_free(device, address());
      case 4: return driver_alloc(device, 0x10000 + pick(8), segment_size(), 0, 0, proto::CU_MEM_CREATE);
      case 5: return make_event(proto::FREE, proto::LAYER_DRIVER, proto::CU_MEM_RELEASE, device, 0x10000 + pick(8), 0);
      case 6:
      case 7: {
        proto::Event e =
            make_event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, device, address(), segment_size());
        e.set_handle(0x10000 + pick(8));
        return e;
      }
      case 8:
        return make_event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, device, address(), block_size());
      case 9:
        return make_event(pick(2) ? proto::ADDRESS_RESERVE : proto::ADDRESS_FREE, proto::LAYER_DRIVER,
                          proto::CU_MEM_ADDRESS_RESERVE, -1, address(), segment_size());
      case 10:
        if (pick(8) == 0) {
          proto::Event e = make_event(proto::CONTEXT_DESTROY, proto::LAYER_DRIVER, proto::CU_CTX_DESTROY, device, 0, 0);
          return e;
        }
        [[fallthrough]];
      case 11:
      case 12:
      case 13:
      case 14: return torch_event(proto::FREE, device, address(), 0, 0, reserved());
      default: return torch_event(proto::ALLOC, device, address(), block_size(), 0, reserved());
    }
  }

 private:
  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(random_); }
  // 64 slots of 0x100 bytes, and now and then the top of the address space.
  uint64_t address() { return pick(40) == 0 ? UINT64_MAX - pick(3) * 0x100 : 0x100000 + pick(64) * 0x100; }
  uint64_t block_size() { return pick(30) == 0 ? UINT64_MAX - pick(4) : pick(6) * 0x80; }
  uint64_t segment_size() { return pick(30) == 0 ? UINT64_MAX - pick(4) : (1 + pick(12)) * 0x100; }
  uint64_t reserved() { return pick(64) * 0x100; }
  std::mt19937_64 random_;
};

std::string describe(const Fragmentation& f) {
  std::ostringstream os;
  os << "known " << f.segments_known << " segments " << f.segment_count << " largest " << f.largest_free_block_bytes
     << " reserved-allocated " << f.reserved_minus_allocated_bytes;
  return os.str();
}

TEST(IncrementalFragmentation, EqualsTheWalkAfterEveryEventOfRandomTraces) {
  uint64_t rows_with_gaps = 0, rows_unknown = 0, rows_with_two_segments = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    MemoryModel kept, walked;
    kept.set_incremental_fragmentation(true);
    RandomEvents events(seed);
    for (int i = 0; i < 600; ++i) {
      proto::Event e = events.next();
      kept.apply(e);
      walked.apply(e);
      for (int32_t device : {0, 1}) {
        for (bool allocator_layer : {false, true}) {
          LayerHint layers{true, allocator_layer};
          Fragmentation want = walked.fragmentation(device, layers);
          Fragmentation got = kept.fragmentation(device, layers);
          ASSERT_EQ(describe(got), describe(want)) << "seed " << seed << " event " << i << " device " << device;
        }
        Fragmentation f = walked.fragmentation(device);
        rows_with_gaps += f.largest_free_block_bytes > 0;
        rows_unknown += f.reserved_minus_allocated_bytes > 0 && !f.segments_known;
        rows_with_two_segments += f.segment_count >= 2;
        ASSERT_EQ(describe(kept.fragmentation(device)), describe(f)) << "seed " << seed << " event " << i;
      }
    }
  }
  // The sequences reach the cases that matter (a comparison of empty layouts would prove nothing).
  EXPECT_GT(rows_with_gaps, 1000u);
  EXPECT_GT(rows_unknown, 100u);
  EXPECT_GT(rows_with_two_segments, 1000u);
}

// Expandable segments at work: pages of 0x100 bytes mapped and unmapped at 48 slots (now and then a
// page of two slots, which overlaps its neighbour until one of them goes), VMM handles of two devices
// that come and go (now and then mapped before they exist), reservations of a few slots made and freed,
// and PyTorch blocks in the pages.
class RandomPages {
 public:
  explicit RandomPages(uint64_t seed) : random_(seed) {}

  proto::Event next() {
    switch (pick(16)) {
      case 0:
      case 1:
      case 2:
      case 3: {
        proto::Event e =
            make_event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, 0, slot(), pick(12) ? 0x100 : 0x200);
        e.set_handle(handle());
        return e;
      }
      case 4:
      case 5:
      case 6:
        return make_event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, 0, slot(), 0x100 * (1 + pick(2)));
      case 7: return driver_alloc(int32_t(pick(2)), handle(), 0x100, 0, 0, proto::CU_MEM_CREATE);
      case 8:
        if (pick(2)) return make_event(proto::FREE, proto::LAYER_DRIVER, proto::CU_MEM_RELEASE, 0, handle(), 0);
        return make_event(pick(2) ? proto::ADDRESS_RESERVE : proto::ADDRESS_FREE, proto::LAYER_DRIVER,
                          proto::CU_MEM_ADDRESS_RESERVE, -1, 0x100000 + pick(12) * 0x400, 0x100 * (1 + pick(16)));
      case 9:
      case 10:
      case 11: return torch_event(proto::FREE, int32_t(pick(2)), slot() + 0x40 * pick(4), 0, 0, 0x1000);
      default: return torch_event(proto::ALLOC, int32_t(pick(2)), slot() + 0x40 * pick(4), 0x40 * pick(3), 0, 0x1000);
    }
  }

 private:
  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(random_); }
  uint64_t slot() { return 0x100000 + pick(48) * 0x100; }
  uint64_t handle() { return 0x10000 + pick(12); }
  std::mt19937_64 random_;
};

TEST(IncrementalFragmentation, EqualsTheWalkAfterEveryMapAndUnmapOfRandomPages) {
  uint64_t rows_with_two_segments = 0, rows_with_gaps = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    MemoryModel kept, walked;
    kept.set_incremental_fragmentation(true);
    RandomPages events(seed);
    for (int i = 0; i < 1500; ++i) {
      proto::Event e = events.next();
      kept.apply(e);
      walked.apply(e);
      for (int32_t device : {0, 1}) {
        Fragmentation f = walked.fragmentation(device);
        rows_with_two_segments += f.segment_count >= 2;
        rows_with_gaps += f.largest_free_block_bytes > 0;
        ASSERT_EQ(describe(kept.fragmentation(device)), describe(f)) << "seed " << seed << " event " << i;
      }
    }
  }
  EXPECT_GT(rows_with_two_segments, 10000u);
  EXPECT_GT(rows_with_gaps, 10000u);
}

TEST(IncrementalFragmentation, ManyOverlappingSegmentsStopBeingKeptAndSayUnknown) {
  // Segment i: [base + i * 4 KiB, + 256 MiB), all overlapping; a 256-byte block at each start marks it.
  // Block event i looks at the i segments before it: keeping n of them costs n^2 / 2 steps, past the
  // budget of 2^20 + 64 per event for n = 2,000 (2,000,000 > 1,048,576 + 64 * 4,000), not for n = 20.
  constexpr uint64_t kBase = 0x10000000;
  for (uint64_t n : {20, 2000}) {
    MemoryModel kept, walked;
    kept.set_incremental_fragmentation(true);
    for (uint64_t i = 0; i < n; ++i) {
      for (const proto::Event& e :
           {driver_alloc(0, kBase + i * 0x1000, 0x10000000),
            torch_event(proto::ALLOC, 0, kBase + i * 0x1000, 0x100, (i + 1) * 0x100, n * 0x10000000)}) {
        kept.apply(e);
        walked.apply(e);
      }
    }
    Fragmentation want = walked.fragmentation(0);
    // The last segment: [base + (n - 1) * 4 KiB, + 256 MiB) with a block of 256 at its start.
    EXPECT_EQ(want.largest_free_block_bytes, 0x10000000u - 0x100u);
    EXPECT_EQ(want.segment_count, n);
    if (n == 20) {
      EXPECT_EQ(describe(kept.fragmentation(0)), describe(want));
      EXPECT_EQ(kept.fragmentation_unknown_from_event(), std::nullopt);
    } else {
      // Given up once i^2 / 2 steps pass 2^20 + 64 * 2i events: not before block i = 1,448 (event 2,897), and by
      // the last event (3,999) at the latest.
      ASSERT_TRUE(kept.fragmentation_unknown_from_event().has_value());
      EXPECT_GE(*kept.fragmentation_unknown_from_event(), 2897u);
      EXPECT_LE(*kept.fragmentation_unknown_from_event(), 3999u);
      Fragmentation unknown = want;
      unknown.segments_known = false;
      unknown.segment_count = 0;
      unknown.largest_free_block_bytes = 0;
      EXPECT_EQ(describe(kept.fragmentation(0)), describe(unknown));
    }
  }
}

TEST(IncrementalFragmentation, ExpandableSegmentsFollowMapsUnmapsAndReservations) {
  // One reservation at 0x40000000 (64 MiB); pages of 2 MiB at +0, +2, +4 MiB, a block [+0, +1 MiB):
  // one 6 MiB segment, largest free block 5 MiB. Unmapping +2 MiB splits it: [+0,+2) holds the block
  // (largest 1 MiB) and [+4,+6), no block, is no longer joined to a run that held one: 1 segment, 1 MiB.
  // Mapping it back joins them again.
  constexpr uint64_t kMiB = 1 << 20;
  MemoryModel model;
  model.set_incremental_fragmentation(true);
  auto map = [](uint64_t address, uint64_t handle) {
    proto::Event e = make_event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, 0, address, 2 * kMiB);
    e.set_handle(handle);
    return e;
  };
  for (const auto& e : {make_event(proto::ADDRESS_RESERVE, proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_RESERVE, -1,
                                   0x40000000, 64 * kMiB),
                        driver_alloc(0, 0x11, 2 * kMiB, 0, 0, proto::CU_MEM_CREATE), map(0x40000000, 0x11),
                        driver_alloc(0, 0x12, 2 * kMiB, 0, 0, proto::CU_MEM_CREATE), map(0x40200000, 0x12),
                        driver_alloc(0, 0x13, 2 * kMiB, 0, 0, proto::CU_MEM_CREATE), map(0x40400000, 0x13),
                        torch_event(proto::ALLOC, 0, 0x40000000, 1 * kMiB, 1 * kMiB, 6 * kMiB)})
    model.apply(e);
  EXPECT_EQ(describe(model.fragmentation(0)), "known 1 segments 1 largest 5242880 reserved-allocated 5242880");
  model.apply(make_event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, 0, 0x40200000, 2 * kMiB));
  // Reserved: 6 MiB less the unmapped page of a reservation that held a block = 4 MiB; allocated 1 MiB.
  EXPECT_EQ(describe(model.fragmentation(0)), "known 1 segments 1 largest 1048576 reserved-allocated 3145728");
  model.apply(map(0x40200000, 0x12));
  EXPECT_EQ(describe(model.fragmentation(0)), "known 1 segments 1 largest 5242880 reserved-allocated 3145728");
}

}  // namespace
}  // namespace memtrace
