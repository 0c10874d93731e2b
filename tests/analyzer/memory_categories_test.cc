// The memory model's rules for what each kind of CUDA memory counts towards (issue 4): pool reserved
// from POOL_RESERVED samples, VMM handles, host memory, arrays, imports, graph memory, context
// teardown, DEVICE_USAGE samples. Hand-made event sequences with the arithmetic in comments.
#include <gtest/gtest.h>

#include "model/memory_model.h"
#include "trace_builder.h"

namespace memtrace {
namespace {

using test::driver_alloc;
using test::driver_free;
using test::make_event;

constexpr uint64_t kMiB = 1 << 20;

MemoryModel replay(const std::vector<proto::Event>& events) {
  MemoryModel model;
  for (const auto& e : events) model.apply(e);
  model.finish();
  return model;
}

proto::Event pool_block(proto::EventKind kind, int32_t device, uint64_t address, uint64_t size,
                        proto::Api api = proto::CUDA_MALLOC_ASYNC) {
  return make_event(kind, proto::LAYER_BLOCK, api, device, address, size, 1000);
}
proto::Event pool_sample(int32_t device, uint64_t pool, uint64_t reserved, proto::Api api = proto::CUDA_MALLOC_ASYNC) {
  return make_event(proto::POOL_RESERVED, proto::LAYER_UNKNOWN, api, device, pool, reserved, 1000);
}
proto::Event with_memory(proto::Event e, proto::Memory memory) {
  e.set_memory(memory);
  return e;
}
proto::Event vmm_create(int32_t device, uint64_t handle, uint64_t size) {
  return driver_alloc(device, handle, size, 1000, 0, proto::CU_MEM_CREATE);
}
proto::Event vmm_release(uint64_t handle) {
  return make_event(proto::FREE, proto::LAYER_DRIVER, proto::CU_MEM_RELEASE, 0, handle, 0, 1000);
}
proto::Event vmm_map(uint64_t address, uint64_t size, uint64_t handle) {
  proto::Event e = make_event(proto::MAP, proto::LAYER_DRIVER, proto::CU_MEM_MAP, 0, address, size, 1000);
  e.set_handle(handle);
  return e;
}
proto::Event vmm_unmap(uint64_t address, uint64_t size) {
  return make_event(proto::UNMAP, proto::LAYER_DRIVER, proto::CU_MEM_UNMAP, 0, address, size, 1000);
}
proto::Event address_reserve(proto::EventKind kind, uint64_t address, uint64_t size) {
  return make_event(kind, proto::LAYER_DRIVER,
                    kind == proto::ADDRESS_RESERVE ? proto::CU_MEM_ADDRESS_RESERVE : proto::CU_MEM_ADDRESS_FREE, -1,
                    address, size, 1000);
}
proto::Event torch_block(proto::EventKind kind, int32_t device, uint64_t address, uint64_t size, uint64_t reserved) {
  proto::Event e = make_event(kind, proto::LAYER_BLOCK, proto::TORCH_ALLOCATOR, device, address, size, 1000);
  e.set_allocator_reserved_bytes(reserved);
  return e;
}

TEST(MemoryCategories, PoolReservedIsTheLatestSampleAndBlocksStandInBeforeTheFirst) {
  std::vector<proto::Event> events = {
      driver_alloc(0, 0x100000, 2 * kMiB, 1000),                         // e0: cudaMalloc 2 MiB
      pool_block(proto::ALLOC, 0, 0x7000000, 3 * kMiB),                  // e1: block 3 MiB, no sample yet
      pool_sample(0, 0xAAA, 32 * kMiB),                                  // e2: the pool reserved 32 MiB
      pool_block(proto::FREE, 0, 0x7000000, 0, proto::CUDA_FREE_ASYNC),  // e3: block freed, pool keeps 32
      pool_sample(0, 0xAAA, 0, proto::CUDA_STREAM_SYNCHRONIZE),          // e4: released at the sync
  };
  MemoryModel model;
  std::vector<DeviceTotals> rows;
  model.set_totals_callback([&](int32_t, int64_t, const DeviceTotals& t) { rows.push_back(t); });
  for (const auto& e : events) model.apply(e);
  // reserved = driver = cudaMalloc + pools; allocated = live pool blocks (the device has a block layer).
  // e0: driver 2, allocated 0 (block layer not yet seen, so allocated = driver 2 at that moment)
  // e1: pools = max(samples 0, blocks 3) = 3: driver 2 + 3 = 5, allocated 3
  // e2: pools = max(32, 3) = 32: driver 34, allocated 3
  // e3: pools = max(32, 0) = 32: driver 34, allocated 0
  // e4: pools = 0: driver 2, allocated 0
  std::vector<DeviceTotals> expected = {{2 * kMiB, 2 * kMiB, 2 * kMiB},
                                        {3 * kMiB, 5 * kMiB, 5 * kMiB},
                                        {3 * kMiB, 34 * kMiB, 34 * kMiB},
                                        {0, 34 * kMiB, 34 * kMiB},
                                        {0, 2 * kMiB, 2 * kMiB}};
  EXPECT_EQ(rows, expected);
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.peak_reserved().bytes, 34 * kMiB);
  EXPECT_EQ(d.peak_reserved().event_index, 2u);
  EXPECT_EQ(d.peak_pools_reserved.bytes, 32 * kMiB);
  EXPECT_EQ(d.peak_allocated().bytes, 3 * kMiB);
  EXPECT_EQ(model.health().pool_samples, 2u);
}

TEST(MemoryCategories, PoolSamplesAddUpOverPoolsAndAFreeFromAnotherDeviceIsChargedToItsOwn) {
  MemoryModel model = replay({
      pool_block(proto::ALLOC, 1, 0x9000000, 4 * kMiB),  // device 1 block 4 MiB
      pool_sample(1, 0xA1, 8 * kMiB),                    // default pool of device 1: 8 MiB
      pool_block(proto::ALLOC, 1, 0x9800000, 1 * kMiB, proto::CUDA_MALLOC_FROM_POOL_ASYNC),
      pool_sample(1, 0xB2, 2 * kMiB, proto::CUDA_MALLOC_FROM_POOL_ASYNC),  // a user pool: 2 MiB
      pool_sample(1, 0xA1, 6 * kMiB, proto::CU_MEM_POOL_TRIM_TO),          // trimmed to 6 MiB
      // freed while device 0 is current: the FREE says device 0, the block is device 1's
      pool_block(proto::FREE, 0, 0x9000000, 0, proto::CUDA_FREE_ASYNC),
  });
  const DeviceState& d = model.devices().at(1);
  // pools = 6 + 2 = 8 MiB (samples; blocks 1 MiB are less); allocated = the 1 MiB block left.
  EXPECT_EQ(model.totals(1), (DeviceTotals{1 * kMiB, 8 * kMiB, 8 * kMiB}));
  EXPECT_EQ(d.pool_reserved_sampled_bytes, 8 * kMiB);
  // Peak reserved: 8 + 2 = 10 MiB after the user pool's first sample.
  EXPECT_EQ(d.peak_reserved().bytes, 10 * kMiB);
  EXPECT_EQ(model.totals(0), (DeviceTotals{}));  // device 0 was named, nothing charged to it
}

TEST(MemoryCategories, VmmHandleCountsFromCreateUntilTheLaterOfReleaseAndLastUnmap) {
  MemoryModel model;
  std::vector<uint64_t> driver;
  model.set_totals_callback([&](int32_t, int64_t, const DeviceTotals& t) { driver.push_back(t.driver_bytes); });
  for (const auto& e : std::vector<proto::Event>{
           address_reserve(proto::ADDRESS_RESERVE, 0x40000000, 64 * kMiB),  // address space only
           vmm_create(0, 0x11, 2 * kMiB),                                   // driver 2 MiB
           vmm_map(0x40000000, 2 * kMiB, 0x11),
           vmm_map(0x40200000, 2 * kMiB, 0x11),  // mapped twice: still 2 MiB
           vmm_release(0x11),                    // released while mapped: still held
           vmm_unmap(0x40000000, 2 * kMiB),      // one mapping left: still held
           vmm_unmap(0x40200000, 2 * kMiB),      // last unmap: freed -> 0
           vmm_create(0, 0x12, 4 * kMiB),        // 4 MiB
           vmm_map(0x40000000, 4 * kMiB, 0x12),
           vmm_unmap(0x40000000, 4 * kMiB),  // unmapped first: still held
           vmm_release(0x12),                // release after the unmap: freed -> 0
           address_reserve(proto::ADDRESS_FREE, 0x40000000, 64 * kMiB),
       })
    model.apply(e);
  model.finish();
  EXPECT_EQ(driver, (std::vector<uint64_t>{2 * kMiB, 0, 4 * kMiB, 0}));
  EXPECT_EQ(model.devices().at(0).peak_driver.bytes, 4 * kMiB);
  EXPECT_EQ(model.devices().at(0).driver_frees, 2u);
  EXPECT_EQ(model.process_totals().peak_address_space_reserved.bytes, 64 * kMiB);
  EXPECT_EQ(model.process_totals().address_space_reserved_bytes, 0u);
  EXPECT_EQ(model.health().unknown_frees, 0u);
}

TEST(MemoryCategories, HostMemoryIsNeverChargedToADevice) {
  MemoryModel model = replay({
      driver_alloc(0, 0x7f0000000000, 8 * kMiB, 1000, 0, proto::CUDA_MALLOC_HOST),  // pinned 8
      with_memory(driver_alloc(0, 0x7f1000000000, 1 * kMiB, 1000, 0, proto::CU_MEM_HOST_ALLOC),
                  proto::MEMORY_HOST_PINNED),                                     // pinned 9
      driver_alloc(0, 0x55550000, 3 * kMiB, 1000, 0, proto::CUDA_HOST_REGISTER),  // registered 3
      with_memory(vmm_create(0, 0x21, 2 * kMiB), proto::MEMORY_HOST_PINNED),      // host cuMemCreate: pinned 11
      driver_alloc(0, 0x200000, 1 * kMiB),                                        // device: 1
      driver_free(0, 0x7f0000000000, 1000, proto::CUDA_FREE_HOST),                // pinned 3
      driver_free(0, 0x55550000, 1000, proto::CUDA_HOST_UNREGISTER),              // registered 0
  });
  EXPECT_EQ(model.totals(0), (DeviceTotals{1 * kMiB, 1 * kMiB, 1 * kMiB}));
  EXPECT_EQ(model.devices().at(0).peak_driver.bytes, 1 * kMiB);
  const ProcessTotals& p = model.process_totals();
  EXPECT_EQ(p.host_pinned_bytes, 3 * kMiB);        // 1 + 2 left
  EXPECT_EQ(p.peak_host_pinned.bytes, 11 * kMiB);  // 8 + 1 + 2
  EXPECT_EQ(p.host_registered_bytes, 0u);
  EXPECT_EQ(p.peak_host_registered.bytes, 3 * kMiB);
  // Leak candidates are device memory only: the 1 MiB cudaMalloc.
  ASSERT_EQ(model.live_at_exit().size(), 1u);
  EXPECT_EQ(model.live_at_exit()[0].size_bytes, 1 * kMiB);
}

TEST(MemoryCategories, ArraysAreDeviceMemoryInTheirOwnCategoryAndManagedIsChargedToNoDevice) {
  MemoryModel model = replay({
      driver_alloc(0, 0x5000, 6 * kMiB, 1000, 0, proto::CU_ARRAY_CREATE),        // array 6
      driver_alloc(0, 0x6000, 2 * kMiB, 1000, 0, proto::CUDA_MALLOC_3D_ARRAY),   // array 8
      driver_alloc(0, 0x300000, 5 * kMiB, 1000, 0, proto::CUDA_MALLOC_MANAGED),  // managed 5
      driver_free(0, 0x5000, 1000, proto::CU_ARRAY_DESTROY),                     // array 2
  });
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.array_bytes, 2 * kMiB);
  EXPECT_EQ(d.peak_array.bytes, 8 * kMiB);
  EXPECT_EQ(d.managed_bytes, 5 * kMiB);
  // Driver = arrays only (managed is not charged): 2 MiB now, 8 at the peak.
  EXPECT_EQ(model.totals(0), (DeviceTotals{2 * kMiB, 2 * kMiB, 2 * kMiB}));
  EXPECT_EQ(d.peak_driver.bytes, 8 * kMiB);
}

// A block-layer event of an array API (a hostile trace: the tracer writes arrays at the driver layer) is charged
// to the device's arrays, as its memory says; the allocated kind must agree, or what is live at a moment would not
// add up to the allocated total.
TEST(MemoryCategories, AnArrayAtTheBlockLayerIsAnArrayNotAnAllocatedBlock) {
  MemoryModel model = replay({
      torch_block(proto::ALLOC, 0, 0x1000, 2 * kMiB, 20 * kMiB),                   // allocated 2
      pool_block(proto::ALLOC, 0, 0x9000000, 4 * kMiB, proto::CU_MIPMAPPED_ARRAY_CREATE),  // array 4
  });
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.array_bytes, 4 * kMiB);
  // allocated: the 2 MiB block; reserved: PyTorch's 20; driver: the 4 MiB array.
  EXPECT_EQ(model.totals(0), (DeviceTotals{2 * kMiB, 20 * kMiB, 4 * kMiB}));
  uint64_t allocated_kind_bytes = 0, allocated_kind_count = 0;
  model.visit_allocated(0, [&](const LiveAllocation& a) {
    allocated_kind_bytes += a.size_bytes;
    ++allocated_kind_count;
  });
  EXPECT_EQ(allocated_kind_bytes, 2 * kMiB);
  EXPECT_EQ(allocated_kind_count, 1u);
}

TEST(MemoryCategories, ImportsAreListedAndNeverCounted) {
  MemoryModel model = replay({
      driver_alloc(0, 0x400000, 1 * kMiB),                                                          // own 1 MiB
      driver_alloc(0, 0x10000000, 16 * kMiB, 1000, 0, proto::CUDA_IPC_OPEN_MEM_HANDLE),             // imported 16
      driver_alloc(0, 0x20000000, 4 * kMiB, 1000, 0, proto::CU_EXTERNAL_MEMORY_GET_MAPPED_BUFFER),  // 20
      driver_alloc(0, 0x31, 0, 1000, 0, proto::CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE),                // size unknown
      vmm_map(0x50000000, 2 * kMiB, 0x31),  // its mapping says 2 MiB: 22
      make_event(proto::FREE, proto::LAYER_DRIVER, proto::CUDA_IPC_CLOSE_MEM_HANDLE, 0, 0x10000000, 0),  // 6
      driver_free(0, 0x20000000, 1000, proto::CU_MEM_FREE),                                              // 2
  });
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.imported_bytes, 2 * kMiB);
  EXPECT_EQ(d.peak_imported.bytes, 22 * kMiB);
  EXPECT_EQ(model.totals(0), (DeviceTotals{1 * kMiB, 1 * kMiB, 1 * kMiB}));
  EXPECT_EQ(d.peak_driver.bytes, 1 * kMiB);
  EXPECT_EQ(model.health().unknown_frees, 0u);
}

proto::Event graph_event(proto::EventKind kind, proto::Api api, uint64_t address, uint64_t graph) {
  proto::Event e = make_event(kind, proto::LAYER_UNKNOWN, api, 0, address, 0, 1000);
  e.set_graph(graph);
  return e;
}

TEST(MemoryCategories, GraphMemoryNodesAreMemoryOnlyAtLaunch) {
  // Captured: cudaMallocAsync 3 MiB and cudaFreeAsync of it while stream capture 7 is active, plus a
  // 5 MiB allocation node added to the same graph afterwards with no free node.
  proto::Event captured_alloc = pool_block(proto::ALLOC, 0, 0xA000000, 3 * kMiB);
  captured_alloc.set_capture_id(7);
  proto::Event captured_free = pool_block(proto::FREE, 0, 0xA000000, 0, proto::CUDA_FREE_ASYNC);
  captured_free.set_capture_id(7);
  proto::Event node = pool_block(proto::ALLOC, 0, 0xB000000, 5 * kMiB, proto::CU_GRAPH_ADD_MEM_ALLOC_NODE);
  node.set_graph(0x6A);
  proto::Event captured = graph_event(proto::GRAPH_CAPTURED, proto::CU_STREAM_END_CAPTURE, 0, 0x6A);
  captured.set_capture_id(7);
  MemoryModel model;
  std::vector<DeviceTotals> rows;
  model.set_totals_callback([&](int32_t, int64_t, const DeviceTotals& t) { rows.push_back(t); });
  for (const auto& e : std::vector<proto::Event>{
           captured_alloc, captured_free, captured, node,  // no memory yet
           graph_event(proto::GRAPH_INSTANTIATE, proto::CU_GRAPH_INSTANTIATE, 0xE1, 0x6A),
           graph_event(proto::GRAPH_LAUNCH, proto::CU_GRAPH_LAUNCH, 0xE1, 0),  // 3 live, freed, 5 live
           pool_sample(0, 0, 8 * kMiB, proto::CU_GRAPH_LAUNCH),                // graph pool: 8 MiB
           pool_block(proto::FREE, 0, 0xB000000, 0, proto::CUDA_FREE_ASYNC),   // the 5 MiB block freed
       })
    model.apply(e);
  // Nothing before the launch. The launch replays the nodes in order: 3 MiB live, freed, 5 MiB live,
  // so blocks reach 5 at most. After it: allocated 5, pools = max(no sample, blocks 5) = 5. After the
  // graph pool's sample: pools = max(8, 5) = 8. After the free: allocated 0, pools 8.
  std::vector<DeviceTotals> expected = {{5 * kMiB, 5 * kMiB, 5 * kMiB},
                                        {5 * kMiB, 8 * kMiB, 8 * kMiB},
                                        {0, 8 * kMiB, 8 * kMiB}};
  EXPECT_EQ(rows, expected);
  const DeviceState& d = model.devices().at(0);
  EXPECT_EQ(d.peak_blocks.bytes, 5 * kMiB);
  EXPECT_EQ(d.graph_block_bytes, 0u);
  EXPECT_EQ(d.graph_reserved_bytes, 8 * kMiB);
  EXPECT_EQ(d.peak_graph.bytes, 8 * kMiB);
  EXPECT_EQ(d.block_allocations, 2u);
  EXPECT_EQ(d.block_frees, 2u);
  EXPECT_EQ(model.health().unknown_frees, 0u);
}

TEST(MemoryCategories, LaunchOfAnUnknownExecutableGraphIsCounted) {
  MemoryModel model = replay({graph_event(proto::GRAPH_LAUNCH, proto::CUDA_GRAPH_LAUNCH, 0xE9, 0)});
  EXPECT_EQ(model.health().unknown_graph_launches, 1u);
}

TEST(MemoryCategories, ContextDestroyFreesWhatTheDriverFreesWithTheContextAndNotVmmOrImports) {
  proto::Event destroy =
      make_event(proto::CONTEXT_DESTROY, proto::LAYER_UNKNOWN, proto::CUDA_DEVICE_RESET, 0, 0, 0, 1000);
  MemoryModel model = replay({
      driver_alloc(0, 0x100000, 1 * kMiB),                                              // freed
      driver_alloc(0, 0x5000, 2 * kMiB, 1000, 0, proto::CUDA_MALLOC_ARRAY),             // freed
      driver_alloc(0, 0x300000, 4 * kMiB, 1000, 0, proto::CU_MEM_ALLOC_MANAGED),        // freed
      driver_alloc(0, 0x7f0000000000, 8 * kMiB, 1000, 0, proto::CU_MEM_ALLOC_HOST),     // freed
      pool_block(proto::ALLOC, 0, 0x9000000, 16 * kMiB),                                // freed
      pool_sample(0, 0xA1, 32 * kMiB),                                                  // the pool goes
      vmm_create(0, 0x11, 64 * kMiB),                                                   // kept
      driver_alloc(0, 0x10000000, 128 * kMiB, 1000, 0, proto::CU_IPC_OPEN_MEM_HANDLE),  // kept
      driver_alloc(1, 0x200000, 256 * kMiB),                                            // other device: kept
      destroy,
  });
  const DeviceState& d = model.devices().at(0);
  // Left on device 0: the 64 MiB handle (driver and reserved). Allocated is the live pool blocks, as
  // the device has a block layer: 0. Arrays, managed, pools 0; the import stays listed.
  EXPECT_EQ(model.totals(0), (DeviceTotals{0, 64 * kMiB, 64 * kMiB}));
  EXPECT_EQ(d.array_bytes, 0u);
  EXPECT_EQ(d.managed_bytes, 0u);
  EXPECT_EQ(d.pool_block_bytes, 0u);
  EXPECT_EQ(d.imported_bytes, 128 * kMiB);
  EXPECT_EQ(d.context_destroys, 1u);
  EXPECT_EQ(model.process_totals().host_pinned_bytes, 0u);
  // Peak driver before the reset: 1 + 2 (array) + 32 (pool) + 64 = 99 MiB.
  EXPECT_EQ(d.peak_driver.bytes, 99 * kMiB);
  EXPECT_EQ(model.totals(1).driver_bytes, 256 * kMiB);
  // Live at exit: the handle on device 0 and the allocation on device 1.
  EXPECT_EQ(model.live_at_exit().size(), 2u);
}

proto::Event in_context(proto::Event e, uint64_t context) {
  e.set_context(context);
  return e;
}

TEST(MemoryCategories, DestroyingACreatedContextFreesOnlyItsOwnAllocations) {
  constexpr uint64_t kPrimary = 0xC0, kCreated = 0xC1;
  proto::Event destroy =
      make_event(proto::CONTEXT_DESTROY, proto::LAYER_UNKNOWN, proto::CU_CTX_DESTROY, 0, kCreated, 0, 1000);
  proto::Event reset = make_event(proto::CONTEXT_DESTROY, proto::LAYER_UNKNOWN, proto::CU_DEVICE_PRIMARY_CTX_RESET, 0,
                                  kPrimary, 0, 1000);
  MemoryModel model;
  std::vector<uint64_t> driver;
  model.set_totals_callback([&](int32_t, int64_t, const DeviceTotals& t) { driver.push_back(t.driver_bytes); });
  for (const auto& e : std::vector<proto::Event>{
           in_context(driver_alloc(0, 0x100000, 2 * kMiB, 1000), kPrimary),  // 2
           pool_block(proto::ALLOC, 0, 0x9000000, 4 * kMiB),                 // 6 (block, no context)
           in_context(driver_alloc(0, 0x800000, 64 * kMiB, 1000, 0, proto::CU_MEM_ALLOC), kCreated),  // 70
           in_context(vmm_create(0, 0x11, 16 * kMiB), kCreated),                                      // 86
           destroy,  // the created context's cuMemAlloc only: 86 - 64 = 22
           reset,    // the primary's cudaMalloc and the pool block: 22 - 2 - 4 = 16 (the handle stays)
       })
    model.apply(e);
  EXPECT_EQ(driver, (std::vector<uint64_t>{2 * kMiB, 6 * kMiB, 70 * kMiB, 86 * kMiB, 22 * kMiB, 16 * kMiB}));
  EXPECT_EQ(model.devices().at(0).context_destroys, 2u);
  EXPECT_EQ(model.devices().at(0).context_freed_bytes, (64 + 2 + 4) * kMiB);
}

proto::Event usage(int32_t device, uint64_t free_bytes, uint64_t total_bytes, std::optional<uint64_t> process,
                   std::optional<uint64_t> others) {
  proto::Event e = make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, device, 0, 0, 1000);
  e.set_device_free_bytes(free_bytes);
  e.set_device_total_bytes(total_bytes);
  if (process) e.set_process_used_bytes(*process);
  if (others) e.set_other_processes_used_bytes(*others);
  return e;
}

TEST(MemoryCategories, DeviceUsageComparesNvmlWithWhatTheEventsAccountFor) {
  constexpr uint64_t kGiB = 1024 * kMiB;
  MemoryModel model = replay({
      usage(0, 79 * kGiB, 80 * kGiB, 500 * kMiB, 0),  // context only: accounted 0
      driver_alloc(0, 0x100000, 1 * kGiB, 1000),
      usage(0, 70 * kGiB, 80 * kGiB, 1524 * kMiB, 8 * kGiB),  // accounted 1 GiB, process 1.5 GiB - 12 MiB
      driver_free(0, 0x100000, 1000),
      usage(0, 71 * kGiB, 80 * kGiB, 500 * kMiB, 8 * kGiB),
  });
  std::optional<DeviceUsage> last = model.last_device_usage(0);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->accounted_bytes, 0u);
  EXPECT_EQ(last->unattributed_bytes(), 500 * kMiB);
  EXPECT_EQ(*last->other_processes_used_bytes, 8 * kGiB);
  EXPECT_EQ(last->time_ns, 5000);
  const DeviceUsage& peak = *model.devices().at(0).peak_usage;
  EXPECT_EQ(*peak.process_used_bytes, 1524 * kMiB);
  EXPECT_EQ(peak.accounted_bytes, 1 * kGiB);
  EXPECT_EQ(peak.unattributed_bytes(), 500 * kMiB);  // 1524 - 1024
  EXPECT_EQ(peak.device_total_bytes, 80 * kGiB);
  EXPECT_FALSE(model.last_device_usage(3).has_value());
  // Without NVML: no process figure, nothing unattributed is claimed.
  MemoryModel no_nvml = replay({usage(0, 10 * kMiB, 80 * kMiB, std::nullopt, std::nullopt)});
  EXPECT_FALSE(no_nvml.last_device_usage(0)->process_used_bytes.has_value());
  EXPECT_EQ(no_nvml.last_device_usage(0)->unattributed_bytes(), 0u);
}

TEST(MemoryCategories, FragmentationFromBlocksInsideSegments) {
  // Two PyTorch segments and one cudaMalloc of the program itself, on device 0:
  //   segment A 0x000000-0x200000 (2 MiB): blocks [0x000000,+256K) [0x100000,+512K)
  //     gaps: 0x040000-0x100000 = 768 KiB, tail 0x180000-0x200000 = 512 KiB
  //   segment B 0x400000-0xC00000 (8 MiB): block [0x600000,+1M)
  //     gaps: head 0x400000-0x600000 = 2 MiB, tail 0x700000-0xC00000 = 5 MiB   <- largest
  //   0x1000000 (16 MiB): the program's own cudaMalloc, holds no block: not a segment
  constexpr uint64_t kKiB = 1024;
  MemoryModel model = replay({
      driver_alloc(0, 0x000000 + 0x10000000, 2 * kMiB), driver_alloc(0, 0x400000 + 0x10000000, 8 * kMiB),
      driver_alloc(0, 0x1000000 + 0x10000000, 16 * kMiB),
      torch_block(proto::ALLOC, 0, 0x000000 + 0x10000000, 256 * kKiB, 26 * kMiB),
      torch_block(proto::ALLOC, 0, 0x100000 + 0x10000000, 512 * kKiB, 26 * kMiB),
      torch_block(proto::ALLOC, 0, 0x600000 + 0x10000000, 1 * kMiB, 26 * kMiB),
      torch_block(proto::ALLOC, 0, 0x400000 + 0x10000000, 128 * kKiB, 26 * kMiB),  // B's head: 2 MiB -> 1.875
      torch_block(proto::FREE, 0, 0x400000 + 0x10000000, 0, 26 * kMiB),            // back to 2 MiB
  });
  Fragmentation f = model.fragmentation(0);
  EXPECT_TRUE(f.segments_known);
  EXPECT_EQ(f.segment_count, 2u);
  EXPECT_EQ(f.largest_free_block_bytes, 5 * kMiB);
  // reserved 26 MiB (PyTorch's figure) - allocated 256 K + 512 K + 1 M = 1.75 MiB = 24.25 MiB
  EXPECT_EQ(f.reserved_minus_allocated_bytes, 26 * kMiB - (256 + 512 + 1024) * kKiB);
  // Without PyTorch blocks the layout is unknown.
  MemoryModel pools = replay({pool_block(proto::ALLOC, 0, 0x9000000, 3 * kMiB), pool_sample(0, 0xA1, 8 * kMiB)});
  Fragmentation p = pools.fragmentation(0);
  EXPECT_FALSE(p.segments_known);
  EXPECT_EQ(p.reserved_minus_allocated_bytes, 5 * kMiB);  // 8 - 3
  EXPECT_EQ(p.segment_count, 0u);
}

TEST(MemoryCategories, PyTorchBlocksInAPoolHaveNoSegmentsToRebuild) {
  // PyTorch's cudaMallocAsync backend: its blocks come from a pool, in no driver allocation.
  MemoryModel model = replay({
      pool_block(proto::ALLOC, 0, 0x9000000, 4 * kMiB),
      pool_sample(0, 0xA1, 8 * kMiB),
      torch_block(proto::ALLOC, 0, 0x9000000, 4 * kMiB, 8 * kMiB),
  });
  Fragmentation f = model.fragmentation(0);
  EXPECT_FALSE(f.segments_known);
  EXPECT_EQ(f.segment_count, 0u);
  // reserved 8 (PyTorch) - allocated 4 + 4 (the torch block and the pool block under it: the device's
  // allocated is torch blocks plus pool blocks) = 0
  EXPECT_EQ(f.reserved_minus_allocated_bytes, 0u);
}

TEST(MemoryCategories, FragmentationOfExpandableSegmentsJoinsContiguousMappings) {
  // One reservation at 0x40000000; three 2 MiB pages mapped one after another (one 6 MiB segment),
  // then a page mapped after a 2 MiB hole (a second segment, holding no block: not a segment).
  //   blocks: [0x40000000,+1M) and [0x40300000,+1M): gaps 0x40100000-0x40300000 = 2 MiB,
  //   tail 0x40400000-0x40600000 = 2 MiB -> largest 2 MiB
  MemoryModel model = replay({
      address_reserve(proto::ADDRESS_RESERVE, 0x40000000, 64 * kMiB),
      vmm_create(0, 0x11, 2 * kMiB),
      vmm_map(0x40000000, 2 * kMiB, 0x11),
      vmm_create(0, 0x12, 2 * kMiB),
      vmm_map(0x40200000, 2 * kMiB, 0x12),
      vmm_create(0, 0x13, 2 * kMiB),
      vmm_map(0x40400000, 2 * kMiB, 0x13),
      vmm_create(0, 0x14, 2 * kMiB),
      vmm_map(0x40800000, 2 * kMiB, 0x14),
      torch_block(proto::ALLOC, 0, 0x40000000, 1 * kMiB, 8 * kMiB),
      torch_block(proto::ALLOC, 0, 0x40300000, 1 * kMiB, 8 * kMiB),
  });
  Fragmentation f = model.fragmentation(0);
  EXPECT_EQ(f.segment_count, 1u);
  EXPECT_EQ(f.largest_free_block_bytes, 2 * kMiB);
  EXPECT_EQ(f.reserved_minus_allocated_bytes, 6 * kMiB);  // 8 - 2
}

TEST(MemoryCategories, SegmentsPyTorchGivesBackLowerItsReservedUntilItsNextReport) {
  // torch.cuda.empty_cache() frees cached segments with cudaFree (or unmaps expandable segments' pages)
  // and reports nothing. Device 0:
  //   e0-e1: two 2 MiB segments; e2-e3: a block in each, PyTorch reports reserved 4 MiB
  //   e4: the block of segment 2 freed (reserved still 4); e5: cudaFree of segment 2 -> 4 - 2 = 2 MiB
  //   e6: a 16 MiB cudaMalloc of the program's own and e7 its cudaFree: never held a block, reserved stays 2
  //   e8: the next report says 2 MiB itself
  MemoryModel model;
  std::vector<uint64_t> reserved;
  model.set_totals_callback([&](int32_t, int64_t, const DeviceTotals& t) { reserved.push_back(t.reserved_bytes); });
  for (const auto& e : {
           driver_alloc(0, 0x10000000, 2 * kMiB),
           driver_alloc(0, 0x20000000, 2 * kMiB),
           torch_block(proto::ALLOC, 0, 0x10000000, 1 * kMiB, 4 * kMiB),
           torch_block(proto::ALLOC, 0, 0x20000000, 1 * kMiB, 4 * kMiB),
           torch_block(proto::FREE, 0, 0x20000000, 0, 4 * kMiB),
           driver_free(0, 0x20000000),
           driver_alloc(0, 0x30000000, 16 * kMiB),
           driver_free(0, 0x30000000),
           torch_block(proto::ALLOC, 0, 0x10100000, 512 * 1024, 2 * kMiB),
       })
    model.apply(e);
  // The first rows come before any report: the layer hint is unknown to a plain replay, so reserved is
  // the driver total there (e0: 2, e1: 4); from e2 on it is PyTorch's.
  std::vector<uint64_t> expected = {2 * kMiB, 4 * kMiB, 4 * kMiB, 4 * kMiB, 4 * kMiB,
                                    2 * kMiB, 2 * kMiB, 2 * kMiB, 2 * kMiB};
  EXPECT_EQ(reserved, expected);

  // Expandable segments: reservation at 0x40000000, pages of 2 MiB at +0, +2, +4 MiB, a block in the
  // first, reported reserved 6 MiB; unmapping the last two pages leaves 6 - 4 = 2 MiB. A page mapped in
  // a reservation that never held a block (0x80000000) changes nothing when unmapped.
  MemoryModel expandable = replay({
      address_reserve(proto::ADDRESS_RESERVE, 0x40000000, 64 * kMiB),
      address_reserve(proto::ADDRESS_RESERVE, 0x80000000, 64 * kMiB),
      vmm_create(0, 0x11, 2 * kMiB),
      vmm_map(0x40000000, 2 * kMiB, 0x11),
      vmm_create(0, 0x12, 2 * kMiB),
      vmm_map(0x40200000, 2 * kMiB, 0x12),
      vmm_create(0, 0x13, 2 * kMiB),
      vmm_map(0x40400000, 2 * kMiB, 0x13),
      vmm_create(0, 0x21, 2 * kMiB),
      vmm_map(0x80000000, 2 * kMiB, 0x21),
      torch_block(proto::ALLOC, 0, 0x40000000, 1 * kMiB, 6 * kMiB),
      vmm_unmap(0x40200000, 4 * kMiB),
      vmm_release(0x12),
      vmm_release(0x13),
      vmm_unmap(0x80000000, 2 * kMiB),
      vmm_release(0x21),
  });
  EXPECT_EQ(expandable.devices().at(0).totals().reserved_bytes, 2 * kMiB);
}

}  // namespace
}  // namespace memtrace
