// Timeline rebuilding: the three per-device totals, peaks and their times, live-at-exit, and the
// trace-health counts, on small hand-made event sequences.
#include <gtest/gtest.h>

#include "model/memory_model.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::driver_free;
using test::make_event;
using test::torch_event;

constexpr uint64_t kMiB = 1 << 20;

struct Row {
  int32_t device;
  int64_t time_ns;
  DeviceTotals totals;
  bool operator==(const Row&) const = default;
};

void PrintTo(const Row& r, std::ostream* os) {
  *os << "{dev " << r.device << " t " << r.time_ns << " alloc " << r.totals.allocated_bytes << " res "
      << r.totals.reserved_bytes << " drv " << r.totals.driver_bytes << "}";
}

MemoryModel replay(const std::vector<proto::Event>& events, std::vector<Row>* rows = nullptr,
                   std::map<int32_t, LayerHint> hints = {}) {
  MemoryModel model;
  model.set_layer_hints(std::move(hints));
  if (rows)
    model.set_totals_callback([rows](int32_t d, int64_t t, const DeviceTotals& totals) {
      rows->push_back({d, t, totals});
    });
  for (const auto& e : events) model.apply(e);
  model.finish();
  return model;
}

// A PyTorch-style sequence on device 0: a 2 MiB segment from cudaMalloc, blocks carved from it, then
// a 4 MiB segment and a 4 MiB block in it. One event every 1000 ns.
std::vector<proto::Event> torch_sequence() {
  return {
      driver_alloc(0, 0x1000, 2 * kMiB, 1000),                                       // e0 driver 2 MiB
      torch_event(proto::ALLOC, 0, 0x1000, 512 * 1024, 512 * 1024, 2 * kMiB, 1000),  // e1 blocks 0.5 MiB
      torch_event(proto::ALLOC, 0, 0x81000, kMiB, 1536 * 1024, 2 * kMiB, 1000),      // e2 blocks 1.5 MiB
      torch_event(proto::FREE, 0, 0x1000, 0, kMiB, 2 * kMiB, 1000),                  // e3 blocks 1 MiB
      driver_alloc(0, 0x400000, 4 * kMiB, 1000),                                     // e4 driver 6 MiB
      torch_event(proto::ALLOC, 0, 0x400000, 4 * kMiB, 5 * kMiB, 6 * kMiB, 1000),    // e5 blocks 5 MiB
      torch_event(proto::FREE, 0, 0x400000, 0, kMiB, 6 * kMiB, 1000),                // e6 blocks 1 MiB
  };
}

TEST(MemoryModel, TorchBlocksGiveAllocatedAndReservedDriverGivesDriver) {
  MemoryModel model = replay(torch_sequence());
  const DeviceState& d = model.devices().at(0);
  DeviceTotals final_totals = d.totals();
  EXPECT_EQ(final_totals.allocated_bytes, kMiB);     // only the 1 MiB block of e2 is live
  EXPECT_EQ(final_totals.reserved_bytes, 6 * kMiB);  // PyTorch's own figure from e6
  EXPECT_EQ(final_totals.driver_bytes, 6 * kMiB);    // 2 + 4 MiB segments
  // Peak allocated: 1 MiB + 4 MiB blocks at e5 (t = 6 x 1000 ns). Not e0's 2 MiB segment, which came
  // before PyTorch's first report.
  EXPECT_EQ(d.peak_allocated().bytes, 5 * kMiB);
  EXPECT_EQ(d.peak_allocated().event_index, 5u);
  EXPECT_EQ(d.peak_allocated().time_ns, 6000);
  EXPECT_EQ(d.peak_reserved().bytes, 6 * kMiB);
  EXPECT_EQ(d.peak_reserved().event_index, 5u);
  EXPECT_EQ(d.peak_driver.bytes, 6 * kMiB);
  EXPECT_EQ(d.peak_driver.event_index, 4u);
  EXPECT_EQ(d.peak_driver.time_ns, 5000);
  EXPECT_EQ(d.driver_allocations, 2u);
  EXPECT_EQ(d.driver_frees, 0u);
  EXPECT_EQ(d.block_allocations, 3u);
  EXPECT_EQ(d.block_frees, 2u);
  EXPECT_TRUE(d.allocator_layer_seen);
  EXPECT_EQ(model.health().unknown_frees, 0u);
}

TEST(MemoryModel, TimelineRowsWithLayerHintsFromAFirstPass) {
  MemoryModel first = replay(torch_sequence());
  std::vector<Row> rows;
  replay(torch_sequence(), &rows, first.layer_hints());
  std::vector<Row> expected = {
      {0, 1000, {0, 0, 2 * kMiB}},  // no block live yet, PyTorch has reported nothing yet
      {0, 2000, {512 * 1024, 2 * kMiB, 2 * kMiB}},
      {0, 3000, {1536 * 1024, 2 * kMiB, 2 * kMiB}},
      {0, 4000, {kMiB, 2 * kMiB, 2 * kMiB}},
      {0, 5000, {kMiB, 2 * kMiB, 6 * kMiB}},
      {0, 6000, {5 * kMiB, 6 * kMiB, 6 * kMiB}},
      {0, 7000, {kMiB, 6 * kMiB, 6 * kMiB}},
  };
  EXPECT_EQ(rows, expected);
}

TEST(MemoryModel, DriverOnlyAllTotalsAreDriver) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0xA000, 1000, 10),                               // e0 1000
      driver_alloc(0, 0xB000, 3000, 10, 0, proto::CU_MEM_ALLOC),       // e1 4000
      driver_free(0, 0xA000, 10),                                      // e2 3000 (size from e0)
      driver_alloc(0, 0xC000, 500, 10, 0, proto::CU_MEM_ALLOC_PITCH),  // e3 3500
  };
  MemoryModel model = replay(events);
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.totals(), (DeviceTotals{3500, 3500, 3500}));
  for (const Peak& p : {d.peak_allocated(), d.peak_reserved(), d.peak_driver}) {
    EXPECT_EQ(p.bytes, 4000u);
    EXPECT_EQ(p.event_index, 1u);
    EXPECT_EQ(p.time_ns, 20);
  }
  EXPECT_EQ(d.driver_allocations, 3u);
  EXPECT_EQ(d.driver_frees, 1u);
  EXPECT_FALSE(d.allocator_layer_seen);
}

TEST(MemoryModel, AsyncPoolBlocksAreAllocatedAndDriverAndCudaFreeReleasesThem) {
  std::vector<proto::Event> events = {
      make_event(proto::ALLOC, proto::LAYER_BLOCK, proto::CUDA_MALLOC_ASYNC, 1, 0x5000, 4096),             // 4096
      make_event(proto::ALLOC, proto::LAYER_BLOCK, proto::CU_MEM_ALLOC_FROM_POOL_ASYNC, 1, 0x6000, 8192),  // 12288
      make_event(proto::FREE, proto::LAYER_BLOCK, proto::CUDA_FREE_ASYNC, 1, 0x5000, 0),                   // 8192
      driver_free(1, 0x6000),  // cudaFree of stream-ordered memory is legal: 0
  };
  MemoryModel model = replay(events);
  const DeviceState& d = model.devices().at(1);
  EXPECT_EQ(d.totals(), (DeviceTotals{0, 0, 0}));
  EXPECT_EQ(d.peak_allocated().bytes, 12288u);
  EXPECT_EQ(d.peak_allocated().event_index, 1u);
  EXPECT_EQ(d.peak_driver.bytes, 12288u);
  EXPECT_EQ(d.peak_reserved().bytes, 12288u);  // no PyTorch layer: reserved is driver
  EXPECT_EQ(d.block_allocations, 2u);
  EXPECT_EQ(d.block_frees, 2u);
  EXPECT_EQ(model.health().unknown_frees, 0u);
}

TEST(MemoryModel, FreeWhileAnotherDeviceIsCurrentChargesTheAllocationsDevice) {
  std::vector<proto::Event> events = {driver_alloc(1, 0x7000, kMiB), driver_free(0, 0x7000)};
  MemoryModel model = replay(events);
  EXPECT_EQ(model.devices().at(1).totals().driver_bytes, 0u);
  EXPECT_EQ(model.devices().at(1).driver_frees, 1u);
  EXPECT_EQ(model.devices().at(1).peak_driver.bytes, kMiB);
  EXPECT_EQ(model.devices().count(0), 0u);  // nothing was charged to device 0
}

TEST(MemoryModel, DoubleAndUnknownFreesAreCountedNeverBelowZero) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0xA000, 100),
      driver_free(0, 0xA000),
      driver_free(0, 0xA000),  // double free
      driver_free(0, 0xBAD),   // never allocated
      driver_free(0, 0),       // cudaFree(nullptr): a no-op, not counted
  };
  MemoryModel model = replay(events);
  EXPECT_EQ(model.health().double_frees, 1u);
  EXPECT_EQ(model.health().unknown_frees, 1u);
  EXPECT_EQ(model.devices().at(0).totals().driver_bytes, 0u);
  EXPECT_EQ(model.devices().at(0).driver_frees, 1u);
}

TEST(MemoryModel, ManagedMemoryIsTrackedButNotCharged) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x9000, 1024 * kMiB, 0, 0, proto::CUDA_MALLOC_MANAGED), driver_alloc(0, 0xA000, 256),
      driver_free(0, 0x9000),  // frees the managed allocation: known, still nothing charged
  };
  MemoryModel model = replay(events);
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.totals(), (DeviceTotals{256, 256, 256}));
  EXPECT_EQ(d.peak_driver.bytes, 256u);
  EXPECT_EQ(d.driver_allocations, 1u);
  EXPECT_EQ(d.driver_frees, 0u);
  EXPECT_EQ(model.health().managed_allocations, 1u);
  EXPECT_EQ(model.health().unknown_frees, 0u);
}

TEST(MemoryModel, VmmHandlesAreChargedFromCreateToReleaseMapsOnlyCounted) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x1, 2 * kMiB, 0, 0, proto::CU_MEM_CREATE),  // handle 0x1
      driver_alloc(0, 0x1, 100),                                   // pointer 0x1: another namespace
      make_event(proto::ADDRESS_RESERVE, proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_RESERVE, 0, 0x7f0000000000,
                 64 * kMiB),
      make_event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, 0, 0x7f0000000000, 2 * kMiB),
      make_event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, 0, 0x7f0000000000, 2 * kMiB),
      make_event(proto::ADDRESS_FREE, proto::LAYER_DRIVER, proto::CU_MEM_ADDRESS_FREE, 0, 0x7f0000000000, 64 * kMiB),
      make_event(proto::FREE, proto::LAYER_DRIVER, proto::CU_MEM_RELEASE, 0, 0x1, 0),
  };
  MemoryModel model = replay(events);
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.totals().driver_bytes, 100u);        // the pointer is still live
  EXPECT_EQ(d.peak_driver.bytes, 2 * kMiB + 100);  // 2,097,252
  EXPECT_EQ(d.peak_driver.event_index, 1u);
  const TraceHealth& h = model.health();
  EXPECT_EQ(h.address_reserves, 1u);
  EXPECT_EQ(h.maps, 1u);
  EXPECT_EQ(h.unmaps, 1u);
  EXPECT_EQ(h.address_frees, 1u);
  EXPECT_EQ(h.unknown_frees, 0u);
}

TEST(MemoryModel, FailedAllocationIsNotChargedOomIsCollected) {
  proto::Event failed = driver_alloc(0, 0, 1024 * kMiB);
  failed.set_result(2);  // cudaErrorMemoryAllocation
  proto::Event oom = make_event(proto::OOM, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0, 1024 * kMiB, 500, 7);
  oom.set_device_free_bytes(1000);
  oom.set_device_total_bytes(2000);
  oom.set_result(2);
  MemoryModel model = replay({driver_alloc(0, 0xA000, 10, 100), failed, oom});
  EXPECT_EQ(model.devices().at(0).totals().driver_bytes, 10u);
  EXPECT_EQ(model.health().error_result_allocations, 1u);
  ASSERT_EQ(model.ooms().size(), 1u);
  EXPECT_EQ(model.failed_allocation_count(), 2u);  // the error-result ALLOC and the OOM
  const OomEvent& o = model.ooms()[0];
  EXPECT_EQ(o.requested_bytes, 1024 * kMiB);
  EXPECT_EQ(o.device, 0);
  EXPECT_EQ(o.device_free_bytes, 1000u);
  EXPECT_EQ(o.device_total_bytes, 2000u);
  EXPECT_EQ(o.stack_id, 7u);
  EXPECT_EQ(o.time_ns, 600);  // 100 + 0 + 500
  EXPECT_EQ(o.api, proto::CUDA_MALLOC);
}

// PyTorch asks the driver for a segment, empties its cache, asks again, then reports the OOM itself:
// one failed tensor allocation, listed once, with the two driver failures folded into it. A driver
// failure on another thread, and one followed by other activity of its thread, stay on their own.
TEST(MemoryModel, DriverFailuresBeforeAnAllocatorOomOfTheSameThreadAreFoldedIntoIt) {
  auto oom = [](proto::Layer layer, proto::Api api, uint64_t size, uint32_t tid) {
    proto::Event e = make_event(proto::OOM, layer, api, 0, 0, size, 10, 0);
    e.set_tid(tid);
    return e;
  };
  proto::Event other_thread_alloc = driver_alloc(0, 0xB000, 64, 10);
  other_thread_alloc.set_tid(2);
  proto::Event retried_ok = driver_alloc(0, 0xC000, 32, 10);
  retried_ok.set_tid(3);
  MemoryModel model = replay({
      oom(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 20 * kMiB, 3),     // thread 3 fails, then succeeds:
      retried_ok,                                                     //   a real OOM of its own
      oom(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 20 * kMiB, 1),     // thread 1: segment request fails
      other_thread_alloc,                                             // thread 2 in between
      oom(proto::LAYER_DRIVER, proto::CUDA_MALLOC, 20 * kMiB, 1),     // thread 1: retry after emptying the cache
      oom(proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, 18 * kMiB, 1),  // thread 1: PyTorch reports the OOM
  });
  ASSERT_EQ(model.ooms().size(), 2u);
  EXPECT_EQ(model.ooms()[0].tid, 3u);
  EXPECT_EQ(model.ooms()[0].driver_attempts, 0u);
  EXPECT_EQ(model.ooms()[1].api, proto::TORCH_ALLOCATOR);
  EXPECT_EQ(model.ooms()[1].requested_bytes, 18 * kMiB);
  EXPECT_EQ(model.ooms()[1].driver_attempts, 2u);
}

TEST(MemoryModel, AllocationAtALiveAddressReplacesItAndIsCounted) {
  MemoryModel model = replay({driver_alloc(0, 0xA000, 100), driver_alloc(0, 0xA000, 300), driver_free(0, 0xA000)});
  EXPECT_EQ(model.health().duplicate_allocations, 1u);
  EXPECT_EQ(model.devices().at(0).peak_driver.bytes, 300u);  // 100 dropped, then 300
  EXPECT_EQ(model.devices().at(0).totals().driver_bytes, 0u);
}

std::vector<proto::Event> finalizing_sequence(bool with_finalizing) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x100000, 2 * kMiB, 1000, 9),                         // segment: not the allocated kind
      torch_event(proto::ALLOC, 0, 0x100000, 100, 100, 2 * kMiB, 1000, 1),  // A
      torch_event(proto::ALLOC, 0, 0x100100, 200, 300, 2 * kMiB, 1000, 2),  // B
  };
  if (with_finalizing) events.push_back(test::finalizing(1000));
  events.push_back(torch_event(proto::FREE, 0, 0x100000, 0, 200, 2 * kMiB, 1000));  // A freed
  return events;
}

TEST(MemoryModel, LiveAtExitIsTakenAtPythonFinalizing) {
  MemoryModel model = replay(finalizing_sequence(true));
  ASSERT_TRUE(model.finalizing_time_ns());
  EXPECT_EQ(*model.finalizing_time_ns(), 4000);
  const auto& live = model.live_at_exit();
  ASSERT_EQ(live.size(), 2u);  // A and B; the driver segment is not an allocated-kind allocation
  EXPECT_EQ(live[0].size_bytes, 100u);
  EXPECT_EQ(live[0].stack_id, 1u);
  EXPECT_EQ(live[0].time_ns, 2000);
  EXPECT_EQ(live[1].size_bytes, 200u);
  EXPECT_EQ(live[1].stack_id, 2u);
}

TEST(MemoryModel, FirstAllocationTimeOfEachSiteIncludesFreedOnes) {
  MemoryModel model = replay(finalizing_sequence(true));
  // Stack 9: the segment at 1000 ns; stack 1: A at 2000 ns (freed later); stack 2: B at 3000 ns.
  std::map<std::pair<int32_t, uint64_t>, int64_t> expected = {{{0, 9}, 1000}, {{0, 1}, 2000}, {{0, 2}, 3000}};
  EXPECT_EQ(model.first_allocation_ns(), expected);
}

TEST(MemoryModel, LiveAtExitWithoutFinalizingIsEndOfTrace) {
  MemoryModel model = replay(finalizing_sequence(false));
  EXPECT_FALSE(model.finalizing_time_ns());
  ASSERT_EQ(model.live_at_exit().size(), 1u);
  EXPECT_EQ(model.live_at_exit()[0].size_bytes, 200u);
}

TEST(MemoryModel, DriverOnlyLiveAtExitIsTheDriverAllocations) {
  MemoryModel model = replay({driver_alloc(0, 0xA000, 100, 0, 3), driver_alloc(0, 0xB000, 50, 0, 4),
                              driver_alloc(0, 0xC000, 7, 0, 5, proto::CUDA_MALLOC_MANAGED)});
  ASSERT_EQ(model.live_at_exit().size(), 2u);  // managed memory is not charged, so not a device leak
  EXPECT_EQ(model.live_at_exit()[0].stack_id, 3u);
  EXPECT_EQ(model.live_at_exit()[1].stack_id, 4u);
}

TEST(MemoryModel, WithoutPyTorchLayerLiveAtExitIsEveryChargedAllocation) {
  // Device 0 uses pool blocks (so allocated = pool blocks) and also a cudaMalloc that is never freed:
  // both are kept memory. Device 1 has PyTorch's layer: its segment is cache, only the block counts.
  MemoryModel model = replay({
      make_event(proto::ALLOC, proto::LAYER_BLOCK, proto::CUDA_MALLOC_ASYNC, 0, 0x5000, 4096, 0, 1),
      driver_alloc(0, 0x9000, 5120, 0, 2, proto::CUDA_MALLOC_PITCH),
      driver_alloc(1, 0x100000, 2 * kMiB, 0, 3),
      torch_event(proto::ALLOC, 1, 0x100000, 512, 512, 2 * kMiB, 0, 4),
  });
  ASSERT_EQ(model.live_at_exit().size(), 3u);
  EXPECT_EQ(model.live_at_exit()[0].stack_id, 1u);
  EXPECT_EQ(model.live_at_exit()[1].stack_id, 2u);
  EXPECT_EQ(model.live_at_exit()[2].stack_id, 4u);
  EXPECT_EQ(model.devices().at(0).totals().allocated_bytes, 4096u);  // the pitched one is driver only
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

proto::Event with_result(proto::Event e, int32_t result) {
  e.set_result(result);
  return e;
}

TEST(MemoryModel, TeardownFreesCountAsFreedAndAreCounted) {
  // 1000 + 24 B allocated; 0xA000 freed during teardown (result 4 = CUDA_ERROR_DEINITIALIZED) and
  // 0xB000's free refused with result 1 (CUDA_ERROR_INVALID_VALUE): driver = 1024 - 1000 = 24 B.
  MemoryModel m =
      replay({driver_alloc(0, 0xA000, 1000), driver_alloc(0, 0xB000, 24),
              with_result(driver_free(0, 0xA000), kTeardownFreeResult), with_result(driver_free(0, 0xB000), 1)});
  const DeviceState& d = m.devices().at(0);
  EXPECT_EQ(d.totals().driver_bytes, 24u);
  EXPECT_EQ(d.driver_frees, 1u);
  EXPECT_EQ(m.health().teardown_frees, 1u);
  EXPECT_EQ(m.health().failed_frees, 1u);
  EXPECT_EQ(m.health().unknown_frees, 0u);
}

TEST(MemoryModel, TeardownFreeOfATorchBlockFreesIt) {
  // A 512 B block freed during teardown, PyTorch's totals reported with the free: allocated 0.
  proto::Event free = with_result(torch_event(proto::FREE, 0, 0x1000, 0, 0, 2 * kMiB), kTeardownFreeResult);
  MemoryModel m = replay({torch_event(proto::ALLOC, 0, 0x1000, 512, 512, 2 * kMiB), free});
  EXPECT_EQ(m.devices().at(0).totals().allocated_bytes, 0u);
  EXPECT_EQ(m.devices().at(0).block_frees, 1u);
  EXPECT_EQ(m.health().teardown_frees, 1u);
}

TEST(MemoryModel, TimestampsGoingBackwardsAreCountedAndTotalsStayExact) {
  // Deltas +5, -2, +1 ns: times 5, 3, 4; one step backwards. Alloc 100, alloc 50, free the first: 50.
  MemoryModel m = replay({driver_alloc(0, 0xA000, 100, 5), driver_alloc(0, 0xB000, 50, -2), driver_free(0, 0xA000, 1)});
  EXPECT_EQ(m.health().backward_timestamps, 1u);
  EXPECT_EQ(m.now_ns(), 4);
  EXPECT_EQ(m.devices().at(0).totals().driver_bytes, 50u);
  EXPECT_EQ(m.devices().at(0).peak_driver.bytes, 150u);
  EXPECT_EQ(m.devices().at(0).peak_driver.time_ns, 3);
}

TEST(MemoryModel, TimeSaturatesInsteadOfOverflowing) {
  // INT64_MAX then +1 more: stays at INT64_MAX (no signed overflow on hostile deltas).
  MemoryModel m = replay({driver_alloc(0, 0xA000, 1, INT64_MAX), driver_alloc(0, 0xB000, 1, 1)});
  EXPECT_EQ(m.now_ns(), INT64_MAX);
}

TEST(MemoryModel, OomListIsBoundedTheRestAreCounted) {
  // A job that retries after every OOM: 10,005 failed cudaMallocs of thread 1, each followed by a
  // successful small allocation (so none is folded). 10,000 are listed, the other 5 only counted.
  std::vector<proto::Event> events;
  for (uint64_t i = 0; i < 10005; ++i) {
    events.push_back(make_event(proto::OOM, proto::LAYER_DRIVER, proto::CUDA_MALLOC, 0, 0, kMiB, 1));
    events.push_back(driver_alloc(0, 0x1000 + i * 16, 16, 1));
  }
  MemoryModel m = replay(events);
  EXPECT_EQ(m.ooms().size(), 10000u);
  EXPECT_EQ(m.health().ooms_not_listed, 5u);
  EXPECT_EQ(m.failed_allocation_count(), 10005u);  // listed or only counted, every one failed
  EXPECT_EQ(m.devices().at(0).totals().driver_bytes, 10005u * 16);
}

}  // namespace
}  // namespace memtrace
