// The dormant live set (preload/attach/live_set.h): what each event kind adds and removes, by (space, address),
// with exact fields; collisions, tombstones and overflow in a table of 8 slots (every key collides with others).
#include "attach/live_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

namespace memtrace {
namespace {

using Row = std::tuple<int, int, int32_t, uint64_t, uint64_t, uint64_t>;  // layer, api, device, address, size, stream

std::vector<Row> rows() {
  std::vector<Row> out;
  live_set_visit(
      [](const LiveEntry& e, void* context) {
        static_cast<std::vector<Row>*>(context)->emplace_back(static_cast<int>(e.layer), static_cast<int>(e.api),
                                                              e.device, e.address, e.size, e.stream);
      },
      &out);
  std::sort(out.begin(), out.end());
  return out;
}

MemoryEvent alloc(Layer layer, Api api, uint64_t address, uint64_t size, int32_t device = 0, uint64_t context = 0) {
  MemoryEvent e;
  e.kind = EventKind::kAlloc;
  e.layer = layer;
  e.api = api;
  e.address = address;
  e.size = size;
  e.device = device;
  e.context = context;
  return e;
}

MemoryEvent free_of(Layer layer, Api api, uint64_t address, int32_t result = 0) {
  MemoryEvent e;
  e.kind = EventKind::kFree;
  e.layer = layer;
  e.api = api;
  e.address = address;
  e.result = result;
  return e;
}

// The driver's answers for the entries noted unresolved (a dormant hook's device allocations): address -> device and
// context; an address not listed is one the driver cannot say anything about.
struct Resolved {
  uint64_t address;
  int32_t device;
  uint64_t context;
};
constexpr Resolved kDriverKnows[] = {{0x1000, 1, 0xC1}, {0x4000, 1, 0xC1}, {0x5000, 0, 0xA}, {0x6000, 0, 0xB}};
int g_resolver_calls = 0;

bool fake_resolve(uint64_t address, int32_t* device, uint64_t* context) {
  g_resolver_calls++;
  for (const Resolved& r : kDriverKnows) {
    if (r.address != address) continue;
    *device = r.device;
    *context = r.context;
    return true;
  }
  return false;
}

MemoryEvent context_destroy(int32_t device, uint64_t context) {
  MemoryEvent e;
  e.kind = EventKind::kContextDestroy;
  e.api = Api::kCuCtxDestroy;
  e.device = device;
  e.address = context;
  return e;
}

constexpr int kDriver = static_cast<int>(Layer::kDriver);
constexpr int kBlock = static_cast<int>(Layer::kBlock);
constexpr int kMalloc = static_cast<int>(Api::kCudaMalloc);
constexpr int kTorch = static_cast<int>(Api::kTorchAllocator);

class LiveSetTest : public testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(live_set_init(8, fake_resolve)); }
  void SetUp() override {
    live_set_clear();
    g_resolver_calls = 0;
  }
};

TEST_F(LiveSetTest, ABlockAndItsSegmentAtOneAddressAreTwoEntries) {
  MemoryEvent segment = alloc(Layer::kDriver, Api::kCudaMalloc, 0x7f0000200000, 2097152, 1);
  segment.stream = 0;
  MemoryEvent block = alloc(Layer::kBlock, Api::kTorchAllocator, 0x7f0000200000, 512, 1);
  block.stream = 0x55;
  live_set_note(segment);
  live_set_note(block);
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, 1, 0x7f0000200000, 2097152, 0},
                                      {kBlock, kTorch, 1, 0x7f0000200000, 512, 0x55}}));
  // The block's free leaves the segment.
  live_set_note(free_of(Layer::kBlock, Api::kTorchAllocator, 0x7f0000200000));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, 1, 0x7f0000200000, 2097152, 0}}));
}

TEST_F(LiveSetTest, AFreeOfAnAddressNotInTheSetIsIgnored) {
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x1000, 4096));
  live_set_note(free_of(Layer::kDriver, Api::kCudaFree, 0x2000));
  live_set_note(free_of(Layer::kBlock, Api::kTorchAllocator, 0x1000));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, 0, 0x1000, 4096, 0}}));
}

TEST_F(LiveSetTest, ATeardownFreeFreesAndAFailedFreeDoesNot) {
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x1000, 4096));
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x3000, 8192));
  live_set_note(free_of(Layer::kDriver, Api::kCudaFree, 0x1000, /*result=*/1));
  live_set_note(free_of(Layer::kDriver, Api::kCudaFree, 0x3000, /*result=*/4));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, 0, 0x1000, 4096, 0}}));
}

TEST_F(LiveSetTest, AnAllocationAgainAtALiveAddressReplacesIt) {
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x1000, 4096));
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x1000, 1024));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, 0, 0x1000, 1024, 0}}));
}

TEST_F(LiveSetTest, CudaFreeOfAStreamOrderedBlockFreesIt) {
  live_set_note(alloc(Layer::kUnknown, Api::kCudaMallocAsync, 0x9000, 1536));
  EXPECT_EQ(rows().size(), 1u);
  live_set_note(free_of(Layer::kDriver, Api::kCudaFree, 0x9000));
  EXPECT_EQ(rows(), std::vector<Row>{});
}

TEST_F(LiveSetTest, HandlesAndReservationsAreKeptAndFreedByTheirOwnCalls) {
  live_set_note(alloc(Layer::kDriver, Api::kCuMemCreate, 0x11, 2097152));
  MemoryEvent reserve;
  reserve.kind = EventKind::kAddressReserve;
  reserve.layer = Layer::kDriver;
  reserve.api = Api::kCuMemAddressReserve;
  reserve.address = 0x11;  // the same number as the handle: another space
  reserve.size = 1 << 30;
  reserve.device = 0;
  live_set_note(reserve);
  EXPECT_EQ(rows().size(), 2u);
  live_set_note(free_of(Layer::kDriver, Api::kCuMemRelease, 0x11));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, static_cast<int>(Api::kCuMemAddressReserve), 0, 0x11, 1 << 30, 0}}));
  MemoryEvent release = reserve;
  release.kind = EventKind::kAddressFree;
  release.api = Api::kCuMemAddressFree;
  live_set_note(release);
  EXPECT_EQ(rows(), std::vector<Row>{});
}

// Eight keys in eight slots: every one but the first probes past others; a ninth finds no room and is counted.
TEST_F(LiveSetTest, CollisionsFillTheTableAndTheNextIsCountedAsOverflow) {
  for (uint64_t i = 1; i <= 8; i++) live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, i << 12, i * 512));
  EXPECT_EQ(rows().size(), 8u);
  EXPECT_EQ(live_set_overflow(), 0u);
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 9 << 12, 9 * 512));
  EXPECT_EQ(live_set_overflow(), 1u);
  EXPECT_EQ(rows().size(), 8u);
  // Every key is still found behind the others: freeing them all empties the set.
  for (uint64_t i = 1; i <= 8; i++) live_set_note(free_of(Layer::kDriver, Api::kCudaFree, i << 12));
  EXPECT_EQ(rows(), std::vector<Row>{});
}

TEST_F(LiveSetTest, TombstonesAreReused) {
  for (uint64_t i = 1; i <= 8; i++) live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, i << 12, 512));
  for (uint64_t i = 1; i <= 3; i++) live_set_note(free_of(Layer::kDriver, Api::kCudaFree, i << 12));
  for (uint64_t i = 21; i <= 23; i++) live_set_note(alloc(Layer::kBlock, Api::kTorchAllocator, i << 12, 1024));
  EXPECT_EQ(live_set_overflow(), 0u);
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, 0, 4 << 12, 512, 0},
                                      {kDriver, kMalloc, 0, 5 << 12, 512, 0},
                                      {kDriver, kMalloc, 0, 6 << 12, 512, 0},
                                      {kDriver, kMalloc, 0, 7 << 12, 512, 0},
                                      {kDriver, kMalloc, 0, 8 << 12, 512, 0},
                                      {kBlock, kTorch, 0, 21 << 12, 1024, 0},
                                      {kBlock, kTorch, 0, 22 << 12, 1024, 0},
                                      {kBlock, kTorch, 0, 23 << 12, 1024, 0}}));
}

// As the analyzer's model: a context's destroy frees what was made in it; the primary context's reset frees what
// has no context, the pool blocks and every context's allocations of the device; handles stay.
TEST_F(LiveSetTest, ContextDestroyFreesItsContextsAllocations) {
  live_set_note(alloc(Layer::kDriver, Api::kCuMemAlloc, 0x1000, 100, 0, /*context=*/0xA));
  live_set_note(alloc(Layer::kDriver, Api::kCuMemAlloc, 0x2000, 200, 0, /*context=*/0xB));
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x3000, 300, 0, /*context=*/0));
  live_set_note(alloc(Layer::kUnknown, Api::kCudaMallocAsync, 0x4000, 400, 0));
  live_set_note(alloc(Layer::kDriver, Api::kCuMemCreate, 0x5, 500, 0));
  live_set_note(alloc(Layer::kDriver, Api::kCuMemAlloc, 0x6000, 600, /*device=*/1, /*context=*/0xA));
  MemoryEvent destroy;
  destroy.kind = EventKind::kContextDestroy;
  destroy.api = Api::kCuCtxDestroy;
  destroy.device = 0;
  destroy.address = 0xA;
  live_set_note(destroy);
  std::vector<uint64_t> sizes;
  for (const Row& r : rows()) sizes.push_back(std::get<4>(r));
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<uint64_t>{200, 300, 400, 500, 600}));
  destroy.api = Api::kCuDevicePrimaryCtxReset;
  destroy.address = 0;
  live_set_note(destroy);
  sizes.clear();
  for (const Row& r : rows()) sizes.push_back(std::get<4>(r));
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<uint64_t>{500, 600}));
}

TEST_F(LiveSetTest, WhatTheSetCannotFollowIsCountedNotKept) {
  MemoryEvent node = alloc(Layer::kDriver, Api::kCuGraphAddMemAllocNode, 0x1000, 4096);
  node.graph = 0x77;
  live_set_note(node);
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, uint64_t{1} << 60, 4096));
  EXPECT_EQ(rows(), std::vector<Row>{});
  EXPECT_EQ(live_set_not_followed(), 2u);
}

TEST_F(LiveSetTest, KeysSayWhatAnEventAllocatesAndFrees) {
  uint64_t allocated, freed, freed_alt;
  live_set_keys_of(alloc(Layer::kBlock, Api::kTorchAllocator, 0x1000, 512), &allocated, &freed, &freed_alt);
  EXPECT_EQ(allocated, (uint64_t{1} << 60) | 0x1000);
  EXPECT_EQ(freed, 0u);
  live_set_keys_of(free_of(Layer::kDriver, Api::kCudaFree, 0x1000), &allocated, &freed, &freed_alt);
  EXPECT_EQ(allocated, 0u);
  EXPECT_EQ(freed, (uint64_t{3} << 60) | 0x1000);
  EXPECT_EQ(freed_alt, (uint64_t{2} << 60) | 0x1000);
  LiveEntry entry;
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x1000, 4096, 1));
  ASSERT_TRUE(live_set_find(freed, &entry));
  EXPECT_EQ(entry.size, 4096u);
  EXPECT_EQ(entry.device, 1);
  EXPECT_FALSE(live_set_find(freed_alt, &entry));
}

// A dormant hook's allocations come without device and context; live_set_resolve asks the driver once per such
// entry: a driver pointer takes both, a pool block the device only (as when the hook looks them up), an address the
// driver does not know gets device -1. Entries noted with their device are not asked about.
TEST_F(LiveSetTest, ResolvingGivesUnresolvedEntriesTheirDeviceAndContext) {
  constexpr int kAsync = static_cast<int>(Api::kCudaMallocAsync);
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x1000, 100, kDeviceUnresolved));
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x2000, 200, /*device=*/0, /*context=*/0xC0));
  live_set_note(alloc(Layer::kDriver, Api::kCudaMalloc, 0x3000, 300, kDeviceUnresolved));
  live_set_note(alloc(Layer::kBlock, Api::kCudaMallocAsync, 0x4000, 400, kDeviceUnresolved));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, -2, 0x1000, 100, 0},
                                      {kDriver, kMalloc, -2, 0x3000, 300, 0},
                                      {kDriver, kMalloc, 0, 0x2000, 200, 0},
                                      {kBlock, kAsync, -2, 0x4000, 400, 0}}));
  live_set_resolve();
  const std::vector<Row> resolved{{kDriver, kMalloc, -1, 0x3000, 300, 0},
                                  {kDriver, kMalloc, 0, 0x2000, 200, 0},
                                  {kDriver, kMalloc, 1, 0x1000, 100, 0},
                                  {kBlock, kAsync, 1, 0x4000, 400, 0}};
  EXPECT_EQ(rows(), resolved);
  EXPECT_EQ(g_resolver_calls, 3);
  live_set_resolve();  // nothing left to ask
  EXPECT_EQ(g_resolver_calls, 3);
  EXPECT_EQ(rows(), resolved);
  // The context each was given: destroying 0xC1 frees the cudaMalloc made in it, not the pool block.
  live_set_note(context_destroy(1, 0xC1));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kMalloc, -1, 0x3000, 300, 0},
                                      {kDriver, kMalloc, 0, 0x2000, 200, 0},
                                      {kBlock, kAsync, 1, 0x4000, 400, 0}}));
}

// A context's destroy comes before the driver destroys it: the entries still unresolved are resolved by its scan,
// so it frees those made in that context and leaves the others, with their device.
TEST_F(LiveSetTest, AContextDestroyResolvesTheEntriesItLooksAt) {
  live_set_note(alloc(Layer::kDriver, Api::kCuMemAlloc, 0x5000, 500, kDeviceUnresolved));
  live_set_note(alloc(Layer::kDriver, Api::kCuMemAlloc, 0x6000, 600, kDeviceUnresolved));
  live_set_note(context_destroy(0, 0xA));
  constexpr int kCuMemAlloc = static_cast<int>(Api::kCuMemAlloc);
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kCuMemAlloc, 0, 0x6000, 600, 0}}));
  EXPECT_EQ(g_resolver_calls, 2);
}

// The dormant hooks' own notes (live_set_note_device_alloc, _free, _torch_block) keep what live_set_note keeps for
// the same events: a driver pointer unresolved, a PyTorch block with its device; a device free frees the driver
// pointer, else the pool block at its address, and never a PyTorch block.
TEST_F(LiveSetTest, TheDormantHooksNotesMatchTheEventsOnes) {
  constexpr int kCuMemAlloc = static_cast<int>(Api::kCuMemAlloc);
  constexpr int kAsync = static_cast<int>(Api::kCudaMallocAsync);
  live_set_note_device_alloc(Api::kCuMemAlloc, 0x1000, 4096);
  live_set_note_torch_block(0x1000, 512, 3);
  live_set_note(alloc(Layer::kBlock, Api::kCudaMallocAsync, 0x9000, 1536, 1));
  EXPECT_EQ(rows(), (std::vector<Row>{{kDriver, kCuMemAlloc, -2, 0x1000, 4096, 0},
                                      {kBlock, kAsync, 1, 0x9000, 1536, 0},
                                      {kBlock, kTorch, 3, 0x1000, 512, 0}}));
  live_set_note_device_free(0x1000);
  live_set_note_device_free(0x9000);
  live_set_note_device_free(0x2000);  // not live: ignored
  EXPECT_EQ(rows(), (std::vector<Row>{{kBlock, kTorch, 3, 0x1000, 512, 0}}));
  live_set_note_torch_block(0x1000, -512, 3);
  EXPECT_EQ(rows(), std::vector<Row>{});
  // An address the key cannot hold is counted as not followed, as live_set_note counts it (twice for a free: the
  // driver pointer's key and the pool block's).
  const uint64_t not_followed = live_set_not_followed();
  live_set_note_device_alloc(Api::kCudaMalloc, uint64_t{1} << 60, 4096);
  live_set_note_device_free(uint64_t{1} << 60);
  EXPECT_EQ(live_set_not_followed(), not_followed + 3);
  EXPECT_EQ(rows(), std::vector<Row>{});
}

}  // namespace
}  // namespace memtrace
