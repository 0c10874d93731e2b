// The memory model's fast path for PyTorch block ALLOC/FREE events (MemoryModel::apply_torch_block)
// against its general path: the same state after every event of sequences that take it and that fall
// back from it at each of its conditions; and LiveTable's single-probe erase.
#include <gtest/gtest.h>

#include <sstream>

#include "model/live_table.h"
#include "model/memory_model.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::driver_free;
using test::make_event;
using test::torch_event;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

std::string describe(const Peak& p) {
  return std::to_string(p.bytes) + "@" + std::to_string(p.time_ns) + "#" + std::to_string(p.event_index);
}

// Everything a report can read from the model, as text, so that a difference shows in the failure.
std::string describe(const MemoryModel& model) {
  std::ostringstream os;
  for (const auto& [device, d] : model.devices()) {
    os << "device " << device << ": driver_layer " << d.driver_layer_bytes << " pool_block " << d.pool_block_bytes
       << " torch_block " << d.torch_block_bytes << " torch_reserved " << d.torch_reserved_bytes << " array "
       << d.array_bytes << " managed " << d.managed_bytes << " imported " << d.imported_bytes << " graph_block "
       << d.graph_block_bytes << " pool_sampled " << d.pool_reserved_sampled_bytes << " graph_reserved "
       << d.graph_reserved_bytes << " layers " << d.block_layer_seen << d.allocator_layer_seen << " counts "
       << d.driver_allocations << "/" << d.driver_frees << "/" << d.block_allocations << "/" << d.block_frees
       << " peaks " << describe(d.peak_driver) << " " << describe(d.peak_blocks) << " "
       << describe(d.peak_torch_reserved) << " " << describe(d.peak_array) << " " << describe(d.peak_managed) << " "
       << describe(d.peak_imported) << " " << describe(d.peak_graph) << " " << describe(d.peak_pools_reserved) << "\n";
    Fragmentation f = model.fragmentation(device);
    os << "  fragmentation " << f.reserved_minus_allocated_bytes << " " << f.segment_count << " "
       << f.largest_free_block_bytes << " " << f.segments_known << "\n  allocated:";
    model.visit_allocated(device, [&](const LiveAllocation& a) {
      os << " " << a.address << ":" << a.size_bytes << ":" << a.stack_id << ":" << a.time_ns << ":" << a.event_index;
    });
    os << "\n";
  }
  const TraceHealth& h = model.health();
  os << "health " << h.events << " " << h.unknown_frees << " " << h.double_frees << " " << h.duplicate_allocations
     << " " << h.error_result_allocations << " " << h.failed_frees << " " << h.teardown_frees << " "
     << h.backward_timestamps << " " << h.managed_allocations << "\n";
  os << "live " << model.live_allocations() << " ooms " << model.ooms().size() << " now " << model.now_ns() << "\n";
  for (const auto& [site, ns] : model.first_allocation_ns())
    os << "site " << site.first << "/" << site.second << "@" << ns << "\n";
  return os.str();
}

std::vector<int32_t> touched(const MemoryModel& model) {
  std::vector<int32_t> devices;
  for (const DeviceState* d : model.devices_touched()) devices.push_back(d->device);
  return devices;
}

struct Row {
  int32_t device;
  int64_t time_ns;
  DeviceTotals totals;
  bool operator==(const Row&) const = default;
};

// Applies `events` to a model with the fast path and one without, comparing them after every event
// (state, touched devices, totals rows); returns how many events took the fast path.
uint64_t expect_same_as_general_path(const std::vector<proto::Event>& events, std::map<int32_t, LayerHint> hints = {}) {
  MemoryModel fast, general;
  general.set_fast_paths(false);
  std::vector<Row> fast_rows, general_rows;
  fast.set_layer_hints(hints);
  general.set_layer_hints(hints);
  fast.set_totals_callback([&](int32_t d, int64_t t, const DeviceTotals& totals) {
    fast_rows.push_back({d, t, totals});
  });
  general.set_totals_callback([&](int32_t d, int64_t t, const DeviceTotals& totals) {
    general_rows.push_back({d, t, totals});
  });
  for (size_t i = 0; i < events.size(); ++i) {
    fast.apply(events[i]);
    general.apply(events[i]);
    EXPECT_EQ(describe(fast), describe(general)) << "after event " << i;
    EXPECT_EQ(touched(fast), touched(general)) << "after event " << i;
    EXPECT_EQ(fast_rows, general_rows) << "after event " << i;
  }
  fast.finish();
  general.finish();
  EXPECT_EQ(fast.live_at_exit().size(), general.live_at_exit().size());
  EXPECT_EQ(general.fast_path_events(), 0u);
  return fast.fast_path_events();
}

proto::Event with_tid(proto::Event e, uint32_t tid) {
  e.set_tid(tid);
  return e;
}

// Blocks in a 2 MiB segment on device 0 and one on device 1, with each condition of the fast path broken
// once. Reserved totals change on frees too (a FREE can set the reserved peak).
std::vector<proto::Event> mixed_sequence() {
  proto::Event managed = torch_event(proto::ALLOC, 0, 0x1f0000, 4 * kKiB, 0, 2 * kMiB, 10, 9);
  managed.set_memory(proto::MEMORY_MANAGED);
  proto::Event failed = torch_event(proto::ALLOC, 0, 0x1e0000, 8 * kMiB, 0, 2 * kMiB, 10);
  failed.set_result(2);
  proto::Event teardown = torch_event(proto::FREE, 0, 0x140000, 0, 0, 2 * kMiB, 10);
  teardown.set_result(kTeardownFreeResult);
  proto::Event graph_node = torch_event(proto::ALLOC, 0, 0x1d0000, 4 * kKiB, 0, 2 * kMiB, 10);
  graph_node.set_graph(77);
  proto::Event no_device_free = torch_event(proto::FREE, -1, 0x172000, 0, 0, 3 * kMiB, 10);
  proto::Event backwards = torch_event(proto::ALLOC, 0, 0x120000, 64 * kKiB, 0, 3 * kMiB, -5, 4);
  return {
      driver_alloc(0, 0x100000, 2 * kMiB, 10),                                 // 0: segment
      torch_event(proto::ALLOC, 0, 0x100000, 512 * kKiB, 0, 2 * kMiB, 10, 1),  // 1: first block: general
      torch_event(proto::ALLOC, 0, 0x180000, 256 * kKiB, 0, 2 * kMiB, 10, 2),  // 2: fast
      torch_event(proto::ALLOC, 0, 0x180000, 128 * kKiB, 0, 2 * kMiB, 10, 3),  // 3: duplicate: general
      torch_event(proto::FREE, 0, 0x100000, 0, 0, 4 * kMiB, 10),               // 4: fast, reserved peak
      torch_event(proto::FREE, 0, 0x100000, 0, 0, 4 * kMiB, 10),               // 5: double free: general
      torch_event(proto::FREE, 0, 0xdead00, 0, 0, 4 * kMiB, 10),               // 6: unknown: general
      torch_event(proto::ALLOC, 0, 0x100000, 64 * kKiB, 0, 2 * kMiB, 10, 1),   // 7: fast, over a freed mark
      driver_alloc(1, 0x900000, 2 * kMiB, 10),                                 // 8: device 1 cached
      torch_event(proto::ALLOC, 1, 0x900000, kMiB, 0, 2 * kMiB, 10, 1),        // 9: device 1's layers unseen: general
      torch_event(proto::ALLOC, 0, 0x140000, 32 * kKiB, 0, 2 * kMiB, 10, 5),   // 10: device 0 not cached
      torch_event(proto::FREE, 0, 0x900000, 0, 0, 2 * kMiB, 10),               // 11: a device 1 block
      managed,                                                                 // 12: managed: general
      torch_event(proto::FREE, 0, 0x1f0000, 0, 0, 2 * kMiB, 10),               // 13: of managed: general
      failed,                                                                  // 14
      teardown,                                                                // 15
      graph_node,                                                              // 16
      torch_event(proto::ALLOC, 0, 0, 0, 0, 2 * kMiB, 10),                     // 17: address 0
      make_event(proto::ALLOC, proto::LAYER_BLOCK, proto::CUDA_MALLOC_ASYNC, 0, 0x700000, 96 * kKiB, 10),  // 18: pool
      torch_event(proto::ALLOC, 0, 0x160000, 16 * kKiB, 0, 2 * kMiB, 10, 6),  // 19: fast, blocks + pool
      with_tid(make_event(proto::OOM, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0, 64 * kMiB, 10), 7),  // 20
      with_tid(torch_event(proto::ALLOC, 0, 0x170000, 8 * kKiB, 0, 2 * kMiB, 10, 6), 8),  // 21: pending OOM
      with_tid(torch_event(proto::ALLOC, 0, 0x171000, 8 * kKiB, 0, 2 * kMiB, 10, 6), 7),  // 22: pending OOM
      torch_event(proto::ALLOC, 0, 0x172000, 8 * kKiB, 0, 2 * kMiB, 10, 6),               // 23: fast again
      no_device_free,                                                                     // 24: device -1, of 23
      backwards,                                                                          // 25: fast, time goes back
      driver_free(0, 0x100000, 10),                                                       // 26: segment given back
      torch_event(proto::FREE, 0, 0x180000, 0, 0, 0, 10),                                 // 27: fast
      torch_event(proto::ALLOC, 2, 0xa00000, kMiB, 0, kMiB, 10, 1),                       // 28: new device 2
      torch_event(proto::ALLOC, 2, 0xb00000, kMiB, 0, 2 * kMiB, 10, 1),                   // 29: fast (no segments)
  };
}

TEST(MemoryModelFastPath, SameStateAsTheGeneralPathAfterEveryEvent) {
  // Fast: 2, 4, 7, 19, 23, 25, 27, 29.
  EXPECT_EQ(expect_same_as_general_path(mixed_sequence()), 8u);
}

TEST(MemoryModelFastPath, SameStateWithLayerHints) {
  std::map<int32_t, LayerHint> hints{{0, {true, true}}, {1, {true, false}}, {2, {false, false}}};
  EXPECT_EQ(expect_same_as_general_path(mixed_sequence(), hints), 8u);
}

// First allocation times per call site on both paths, with stack ids in the array, past it, and past
// its limit (SiteFirstTimes::kMaxDenseStackId), on two devices.
TEST(MemoryModelFastPath, SameFirstAllocationTimesWhateverTheStackId) {
  const uint64_t huge = uint64_t(1) << 40;
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x100000, 2 * kMiB, 10, 7),                              // 0: site 0/7 at 10
      torch_event(proto::ALLOC, 0, 0x100000, 4 * kKiB, 0, 2 * kMiB, 10, 2),    // 1: general, site 0/2 at 20
      torch_event(proto::ALLOC, 0, 0x101000, 4 * kKiB, 0, 2 * kMiB, 10, 2),    // 2: fast, 0/2 stays 20
      torch_event(proto::ALLOC, 0, 0x102000, 4 * kKiB, 0, 2 * kMiB, 10, 300),  // 3: fast, 0/300 at 40
      torch_event(proto::ALLOC, 0, 0x103000, 4 * kKiB, 0, 2 * kMiB, 10,
                  huge),  // 4: general (past the array), 0/huge at 50
      torch_event(proto::ALLOC, 0, 0x104000, 4 * kKiB, 0, 2 * kMiB, 10, huge),  // 5: general, stays 50
      driver_alloc(1, 0x900000, 2 * kMiB, 10, 2),                               // 6: site 1/2 at 70
      torch_event(proto::ALLOC, 1, 0x900000, 4 * kKiB, 0, 2 * kMiB, 10, 300),   // 7: general (layers), 1/300 at 80
      torch_event(proto::ALLOC, 0, 0x105000, 4 * kKiB, 0, 2 * kMiB, 10, 1),     // 8: general, 0/1 at 90
  };
  EXPECT_EQ(expect_same_as_general_path(events), 2u);  // 2, 3
  MemoryModel model;
  for (const auto& e : events) model.apply(e);
  std::map<std::pair<int32_t, uint64_t>, int64_t> expected = {{{0, 1}, 90},   {{0, 2}, 20},    {{0, 7}, 10},
                                                              {{0, 300}, 40}, {{0, huge}, 50}, {{1, 2}, 70},
                                                              {{1, 300}, 80}};
  EXPECT_EQ(model.first_allocation_ns(), expected);
}

// The fast path leaves devices_touched() as it finds it, which it runs only where that is {its device}:
// a general event in between that touches no device (a failed allocation) leaves the next block event
// to the general path, which makes it {0} again for the fast path after it.
TEST(MemoryModelFastPath, TouchedDevicesAfterAGeneralEventThatTouchesNone) {
  proto::Event failed = driver_alloc(0, 0, 64 * kMiB, 10);
  failed.set_result(2);
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x100000, 2 * kMiB, 10),                               // 0: touches {0}
      torch_event(proto::ALLOC, 0, 0x100000, 4 * kKiB, 0, 2 * kMiB, 10, 1),  // 1: general, {0}
      torch_event(proto::ALLOC, 0, 0x101000, 4 * kKiB, 0, 2 * kMiB, 10, 1),  // 2: fast, {0}
      failed,                                                                // 3: general, {}
      torch_event(proto::ALLOC, 0, 0x102000, 4 * kKiB, 0, 2 * kMiB, 10, 1),  // 4: general, {0} again
      torch_event(proto::ALLOC, 0, 0x103000, 4 * kKiB, 0, 2 * kMiB, 10, 1),  // 5: fast, {0}
  };
  EXPECT_EQ(expect_same_as_general_path(events), 2u);  // 2 and 5
  MemoryModel model;
  for (size_t i = 0; i < 4; ++i) model.apply(events[i]);
  EXPECT_EQ(touched(model), std::vector<int32_t>{});
  model.apply(events[4]);
  EXPECT_EQ(touched(model), std::vector<int32_t>{0});
  EXPECT_EQ(model.fast_path_events(), 1u);  // 2
  model.apply(events[5]);
  EXPECT_EQ(touched(model), std::vector<int32_t>{0});
  EXPECT_EQ(model.fast_path_events(), 2u);  // 2, 5
}

// The fast path makes no call: a block ALLOC at which the live table would have to grow (its index
// at half its slots, or its pool out of room) takes the general path, which grows it, and the fast path
// takes the next. 198 blocks in one segment, freed, then allocated again at the same addresses.
TEST(MemoryModelFastPath, GrowthOfTheLiveTableTakesTheGeneralPath) {
  std::vector<proto::Event> events = {driver_alloc(0, 0x10000000, 64 * kMiB, 10)};  // 0: the segment
  for (uint64_t i = 0; i < 199; ++i)  // 1: the first block (general), 2-199
    events.push_back(torch_event(proto::ALLOC, 0, 0x10000000 + i * 0x1000, 4 * kKiB, 0, 64 * kMiB, 10, 1 + i % 7));
  for (uint64_t i = 1; i < 199; ++i)  // 200-397: frees of 2-199's blocks
    events.push_back(torch_event(proto::FREE, 0, 0x10000000 + i * 0x1000, 0, 0, 64 * kMiB, 10));
  for (uint64_t i = 1; i < 199; ++i)  // 398-595: the same blocks again, over freed marks, in freed slots
    events.push_back(torch_event(proto::ALLOC, 0, 0x10000000 + i * 0x1000, 8 * kKiB, 0, 64 * kMiB, 10, 2));
  // Before event k (2-199) the index holds k keys and the pool has used k slots. The index grows at
  // half its slots: 16 slots from the first key, so at 8, 16, 32, 64 and 128 keys; the pool has room
  // for 64, then 128, then 256 slots: at 64 and 128 too. General: 0, 1, 8, 16, 32, 64, 128; the rest
  // of 2-199 (193), the 198 frees and the 198 ALLOCs after them (200 keys, under the index's 256) fast.
  EXPECT_EQ(expect_same_as_general_path(events), 193u + 198u + 198u);
}

TEST(MemoryModelFastPath, PeaksOfBlocksAndReservedOnFastEvents) {
  MemoryModel model;
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x100000, 4 * kMiB, 100),                              // e0 driver 4 MiB
      torch_event(proto::ALLOC, 0, 0x100000, kMiB, 0, 2 * kMiB, 100),        // e1 blocks 1 MiB (general)
      torch_event(proto::ALLOC, 0, 0x200000, 2 * kMiB, 0, 3 * kMiB, 100),    // e2 blocks 3 MiB, reserved 3
      torch_event(proto::FREE, 0, 0x100000, 0, 0, 4 * kMiB, 100),            // e3 blocks 2 MiB, reserved 4
      torch_event(proto::ALLOC, 0, 0x100000, 512 * kKiB, 0, 1 * kMiB, 100),  // e4 blocks 2.5 MiB, reserved 1
  };
  for (const auto& e : events) model.apply(e);
  EXPECT_EQ(model.fast_path_events(), 3u);  // e2, e3, e4
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.torch_block_bytes, 2 * kMiB + 512 * kKiB);  // 1 + 2 - 1 + 0.5 MiB
  // Blocks peaked at e2: 1 + 2 = 3 MiB at 300 ns; e4's 2.5 MiB is less.
  EXPECT_EQ(d.peak_blocks.bytes, 3 * kMiB);
  EXPECT_EQ(d.peak_blocks.time_ns, 300);
  EXPECT_EQ(d.peak_blocks.event_index, 2u);
  // Reserved peaked at the FREE e3 (4 MiB at 400 ns); e4 reports 1 MiB.
  EXPECT_EQ(d.peak_torch_reserved.bytes, 4 * kMiB);
  EXPECT_EQ(d.peak_torch_reserved.event_index, 3u);
  EXPECT_EQ(d.torch_reserved_bytes, kMiB);
  EXPECT_EQ(d.block_allocations, 3u);
  EXPECT_EQ(d.block_frees, 1u);
  EXPECT_EQ(d.peak_driver.bytes, 4 * kMiB);
  EXPECT_EQ(d.peak_driver.event_index, 0u);
  EXPECT_EQ(model.live_allocations(), 3u);  // the segment and the blocks of e2 and e4
}

// allocated_peak_raised() lets PeakCapture skip its walk over the touched devices: it must be true
// after every event that raises a peak_allocated(), through either path.
TEST(MemoryModelFastPath, AllocatedPeakRaisedByExactlyTheEventsThatRaiseIt) {
  for (bool fast : {true, false}) {
    MemoryModel model;
    model.set_fast_paths(fast);
    std::vector<proto::Event> events = {
        driver_alloc(0, 0x100000, 2 * kMiB, 100),                              // e0 driver 0 -> 2 MiB: raised
        torch_event(proto::ALLOC, 0, 0x100000, kMiB, 0, 2 * kMiB, 100),        // e1 blocks 0 -> 1 MiB: raised
        torch_event(proto::ALLOC, 0, 0x1c0000, 256 * kKiB, 0, 2 * kMiB, 100),  // e2 blocks 1.25 MiB: raised
        torch_event(proto::FREE, 0, 0x100000, 0, 0, 3 * kMiB, 100),            // e3 blocks 0.25 MiB, reserved up
        torch_event(proto::ALLOC, 0, 0x100000, kMiB, 0, 3 * kMiB, 100),        // e4 blocks 1.25 MiB: not above
        torch_event(proto::ALLOC, 0, 0x180000, 4 * kKiB, 0, 3 * kMiB, 100),    // e5 1.25 MiB + 4 KiB: raised
        driver_alloc(0, 0x400000, 2 * kMiB, 100),                              // e6 driver 2 -> 4 MiB: raised
        driver_free(0, 0x400000, 100),                                         // e7 driver 2 MiB
    };
    std::vector<bool> raised;
    for (const auto& e : events) {
      model.apply(e);
      raised.push_back(model.allocated_peak_raised());
    }
    EXPECT_EQ(raised, (std::vector<bool>{true, true, true, false, false, true, true, false})) << "fast " << fast;
    EXPECT_EQ(model.fast_path_events(), fast ? 4u : 0u);  // e2 to e5
  }
}

TEST(LiveTable, EraseOfAFoundEntryRemembersTheFreeUpToTheLimit) {
  LiveTable table(1);  // remembers one freed key
  ASSERT_EQ(table.insert(LiveAllocation{.space = AddressSpace::kTorchBlock, .size_bytes = 10, .address = 0x10}),
            nullptr);
  ASSERT_EQ(table.insert(LiveAllocation{.space = AddressSpace::kTorchBlock, .size_bytes = 20, .address = 0x20}),
            nullptr);
  EXPECT_FALSE(table.find_entry(AddressSpace::kPoolBlock, 0x10));  // another space
  LiveTable::Found first = table.find_entry(AddressSpace::kTorchBlock, 0x10);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->size_bytes, 10u);
  table.erase(first);
  EXPECT_TRUE(table.was_freed(AddressSpace::kTorchBlock, 0x10));
  EXPECT_FALSE(table.find_entry(AddressSpace::kTorchBlock, 0x10));
  LiveTable::Found second = table.find_entry(AddressSpace::kTorchBlock, 0x20);
  ASSERT_TRUE(second);
  table.erase(second);  // past the limit: forgotten, not remembered
  EXPECT_FALSE(table.was_freed(AddressSpace::kTorchBlock, 0x20));
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.freed_remembered(), 1u);
  // Both slots are free again: a new allocation at 0x20 is live and found.
  ASSERT_EQ(table.insert(LiveAllocation{.space = AddressSpace::kTorchBlock, .size_bytes = 30, .address = 0x20}),
            nullptr);
  EXPECT_EQ(table.find(AddressSpace::kTorchBlock, 0x20)->size_bytes, 30u);
  EXPECT_EQ(table.size(), 1u);
}

TEST(LiveTable, EmplaceFillsInPlaceAndChangesNothingAtALiveKey) {
  LiveTable table(4);
  auto [a, inserted] = table.emplace(AddressSpace::kPoolBlock, 0x40);
  ASSERT_TRUE(inserted);
  EXPECT_EQ(a->space, AddressSpace::kPoolBlock);
  EXPECT_EQ(a->address, 0x40u);
  EXPECT_EQ(a->size_bytes, 0u);  // the rest is a default LiveAllocation
  a->size_bytes = 64;
  auto [b, again] = table.emplace(AddressSpace::kPoolBlock, 0x40);
  EXPECT_FALSE(again);
  EXPECT_EQ(b->size_bytes, 64u);  // the live one, unchanged
  EXPECT_EQ(table.size(), 1u);
  // The same address in another space is another key.
  EXPECT_TRUE(table.emplace(AddressSpace::kTorchBlock, 0x40).second);
  EXPECT_EQ(table.size(), 2u);
}

// The fast path tests Event.result, memory, graph and capture_id as whole 64-bit slots: a slot whose
// accessor narrows it to 0 (result() is its low 32 bits), and a FREE carrying a memory kind, go to the
// general path (the fast path counts neither) and leave the same state as there.
TEST(MemoryModelFastPath, SlotsThatNarrowToZeroAndAFreesMemoryTakeTheGeneralPath) {
  std::vector<EventFields> events = {
      driver_alloc(0, 0x100000, 2 * kMiB, 10),                                 // e0 segment
      torch_event(proto::ALLOC, 0, 0x100000, 512 * kKiB, 0, 2 * kMiB, 10, 1),  // e1 first block: general
      torch_event(proto::ALLOC, 0, 0x180000, 256 * kKiB, 0, 2 * kMiB, 10, 2),  // e2 fast
      torch_event(proto::ALLOC, 0, 0x1c0000, 64 * kKiB, 0, 2 * kMiB, 10, 3),   // e3 result slot 2^32: general
      torch_event(proto::FREE, 0, 0x100000, 0, 0, 2 * kMiB, 10),               // e4 memory 1 on a FREE: general
      torch_event(proto::FREE, 0, 0x180000, 0, 0, 2 * kMiB, 10),               // e5 fast
  };
  events[3].values[EventFields::kResult] = uint64_t(1) << 32;
  ASSERT_EQ(events[3].result(), 0);
  events[4].values[EventFields::kMemory] = proto::MEMORY_MANAGED;
  MemoryModel fast, general;
  general.set_fast_paths(false);
  for (size_t i = 0; i < events.size(); ++i) {
    fast.apply(events[i]);
    general.apply(events[i]);
    EXPECT_EQ(describe(fast), describe(general)) << "after event " << i;
  }
  EXPECT_EQ(fast.fast_path_events(), 2u);  // e2, e5
  // e3 is live (a result whose low 32 bits are 0 is success), e4 freed the first block: 256 + 64 KiB,
  // then e5 freed e2's 256 KiB.
  EXPECT_EQ(fast.devices().at(0).torch_block_bytes, 64 * kKiB);
  EXPECT_EQ(fast.live_allocations(), 2u);  // the segment and e3's block
}

// emplace_for_overwrite() leaves the slot as it was for the caller to assign: a reused slot still holds
// the ended allocation, a live key is returned unchanged, and a whole assignment reads back as given.
TEST(LiveTable, EmplaceForOverwriteReusesTheSlotAndChangesNothingAtALiveKey) {
  LiveTable table(4);
  ASSERT_EQ(table.insert(LiveAllocation{.space = AddressSpace::kTorchBlock, .size_bytes = 10, .address = 0x10}),
            nullptr);
  LiveTable::Found first = table.find_entry(AddressSpace::kTorchBlock, 0x10);
  ASSERT_TRUE(first);
  table.erase(first);  // slot 0 is free again
  auto [a, inserted] = table.emplace_for_overwrite(AddressSpace::kTorchBlock, 0x20);
  ASSERT_TRUE(inserted);
  EXPECT_EQ(a->size_bytes, 10u);  // slot 0's old contents: not reset
  *a = LiveAllocation{.space = AddressSpace::kTorchBlock, .size_bytes = 20, .address = 0x20};
  auto [b, again] = table.emplace_for_overwrite(AddressSpace::kTorchBlock, 0x20);
  EXPECT_FALSE(again);
  EXPECT_EQ(b, a);
  EXPECT_EQ(b->size_bytes, 20u);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.find(AddressSpace::kTorchBlock, 0x10), nullptr);
  EXPECT_EQ(table.find(AddressSpace::kTorchBlock, 0x20)->size_bytes, 20u);
}

}  // namespace
}  // namespace memtrace
