// The PyTorch snapshot's answer (preload/attach/torch_snapshot_parse.cc) parsed into live entries and baselines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attach/torch_snapshot.h"

namespace {

struct Listed {
  std::vector<memtrace::LiveEntry> live;
  std::vector<memtrace::DeviceBaseline> devices;
  std::vector<char> order;  // 'L' or 'D', in call order
};

memtrace::SnapshotSink sink_of(Listed* listed) {
  return {[](const memtrace::LiveEntry& e, void* c) {
            static_cast<Listed*>(c)->live.push_back(e);
            static_cast<Listed*>(c)->order.push_back('L');
          },
          [](const memtrace::DeviceBaseline& b, void* c) {
            static_cast<Listed*>(c)->devices.push_back(b);
            static_cast<Listed*>(c)->order.push_back('D');
          },
          nullptr, listed};
}

bool parse(const std::string& text, Listed* listed, std::string* why) {
  char buffer[256] = {};
  bool complete = memtrace::torch_snapshot_parse(text.data(), text.size(), sink_of(listed), buffer, sizeof buffer);
  *why = buffer;
  return complete;
}

TEST(TorchSnapshotParse, NativeBackendSegmentsBlocksAndBaselines) {
  // Device 0: a 2 MiB cudaMalloc'd segment with two live blocks (512 + 1024 bytes) on stream 0, and a 20 MiB
  // expandable segment with one 4 MiB block on stream 77; device 1 has a context and nothing allocated.
  const std::string text =
      "A native\n"
      "S 0 1000000 2097152 0 0\n"
      "B 0 1000000 512 0\n"
      "B 0 1001024 1024 0\n"
      "S 0 9000000 20971520 77 1\n"
      "B 0 9000000 4194304 77\n"
      "D 0 80000 150000 4195840 23068672\n"
      "D 1 149000 150000 0 0";
  Listed listed;
  std::string why;
  EXPECT_TRUE(parse(text, &listed, &why));
  EXPECT_EQ(why, "");
  ASSERT_EQ(listed.live.size(), 5u);
  const memtrace::LiveEntry& segment = listed.live[0];
  EXPECT_EQ(segment.layer, memtrace::Layer::kDriver);
  EXPECT_EQ(segment.api, memtrace::Api::kCuMemAlloc);
  EXPECT_EQ(segment.device, 0);
  EXPECT_EQ(segment.address, 1000000u);
  EXPECT_EQ(segment.size, 2097152u);
  EXPECT_FALSE(segment.expandable_segment);
  const memtrace::LiveEntry& block = listed.live[2];
  EXPECT_EQ(block.layer, memtrace::Layer::kBlock);
  EXPECT_EQ(block.api, memtrace::Api::kTorchAllocator);
  EXPECT_EQ(block.address, 1001024u);
  EXPECT_EQ(block.size, 1024u);
  const memtrace::LiveEntry& expandable = listed.live[3];
  EXPECT_EQ(expandable.layer, memtrace::Layer::kDriver);
  EXPECT_EQ(expandable.api, memtrace::Api::kUnknown);
  EXPECT_TRUE(expandable.expandable_segment);
  EXPECT_EQ(expandable.stream, 77u);
  EXPECT_EQ(listed.live[4].stream, 77u);
  EXPECT_EQ(listed.live[4].size, 4194304u);
  ASSERT_EQ(listed.devices.size(), 2u);
  EXPECT_EQ(listed.devices[0].device, 0);
  EXPECT_EQ(listed.devices[0].device_free_bytes, 80000u);
  EXPECT_EQ(listed.devices[0].device_total_bytes, 150000u);
  EXPECT_TRUE(listed.devices[0].has_allocator_totals);
  EXPECT_EQ(listed.devices[0].allocator_allocated_bytes, 4195840u);  // 512 + 1024 + 4194304
  EXPECT_EQ(listed.devices[0].allocator_reserved_bytes, 23068672u);  // 2 MiB + 20 MiB
  EXPECT_EQ(listed.devices[1].allocator_allocated_bytes, 0u);
  EXPECT_EQ(std::string(listed.order.begin(), listed.order.end()), "LLLLLDD");  // baselines after the live set
}

TEST(TorchSnapshotParse, AsyncBackendGivesBlocksUnknownPerDevice) {
  Listed listed;
  std::string why;
  EXPECT_FALSE(parse("A cudaMallocAsync\nD 0 100 200 3000 8000\nD 1 100 200 0 0\n", &listed, &why));
  EXPECT_EQ(why, "the cudaMallocAsync backend lists no blocks: its allocated bytes are blocks_unknown");
  ASSERT_EQ(listed.live.size(), 1u);  // device 1 has nothing allocated
  EXPECT_TRUE(listed.live[0].blocks_unknown);
  EXPECT_EQ(listed.live[0].layer, memtrace::Layer::kBlock);
  EXPECT_EQ(listed.live[0].device, 0);
  EXPECT_EQ(listed.live[0].address, 0u);
  EXPECT_EQ(listed.live[0].size, 3000u);
  ASSERT_EQ(listed.devices.size(), 2u);
  EXPECT_EQ(listed.devices[0].allocator_reserved_bytes, 8000u);
}

TEST(TorchSnapshotParse, MismatchAndErrorSayWhy) {
  Listed listed;
  std::string why;
  EXPECT_FALSE(
      parse("A native\nB 0 64 512 0\nD 0 1 2 1024 2097152\nW device 0: the snapshot lists 512 bytes of "
            "blocks, memory_allocated() says 1024\n",
            &listed, &why));
  EXPECT_EQ(why, "device 0: the snapshot lists 512 bytes of blocks, memory_allocated() says 1024");
  EXPECT_EQ(listed.live.size(), 1u);  // what was listed stands
  EXPECT_EQ(listed.devices.size(), 1u);

  Listed none;
  EXPECT_FALSE(parse("E torch.cuda is not initialized in this process", &none, &why));
  EXPECT_EQ(why, "torch.cuda is not initialized in this process");
  EXPECT_TRUE(none.live.empty());
  EXPECT_TRUE(none.devices.empty());
}

TEST(TorchSnapshotParse, MalformedLinesAreSkipped) {
  Listed listed;
  std::string why;
  EXPECT_TRUE(parse("A native\nB 0 64\nS x y\nD 0 1 2\n\nB 0 128 256 0", &listed, &why));
  ASSERT_EQ(listed.live.size(), 1u);
  EXPECT_EQ(listed.live[0].address, 128u);
  EXPECT_TRUE(listed.devices.empty());
}

}  // namespace
