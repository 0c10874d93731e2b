// What `summary` and `timeline` print of the memory categories, fragmentation and DEVICE_USAGE: run
// the memtrace executable on small hand-made traces and compare with values worked out by hand.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "trace_builder.h"

namespace memtrace {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Device 0, PyTorch-style: one 4 MiB segment at 0x100000 (cudaMalloc), blocks placed in it.
//   t 0.1 s  segment                   blocks none
//   t 0.2 s  block 1 MiB at 0x100000   free: 0x200000-0x500000 = 3 MiB
//   t 0.3 s  block 1 MiB at 0x300000   free: 0x200000-0x300000 = 1 MiB, 0x400000-0x500000 = 1 MiB
//   t 1.2 s  first block freed         free: 0x100000-0x300000 = 2 MiB, 1 MiB
// PyTorch reports reserved 4 MiB throughout.
std::string fragmenting_trace() {
  test::TraceBuilder b;
  b.start()
      .event(test::driver_alloc(0, 0x100000, 4 * kMiB, 100'000'000))
      .event(test::torch_event(proto::ALLOC, 0, 0x100000, kMiB, kMiB, 4 * kMiB, 100'000'000))
      .event(test::torch_event(proto::ALLOC, 0, 0x300000, kMiB, 2 * kMiB, 4 * kMiB, 100'000'000))
      .event(test::torch_event(proto::FREE, 0, 0x100000, 0, kMiB, 4 * kMiB, 900'000'000))
      .end_chunk();
  std::string path = test::temp_path("fragmenting.mtrace");
  test::write_file(path, b.bytes());
  return path;
}

TEST(ReportCategories, TimelineRowsCarryFragmentation) {
  std::string path = fragmenting_trace();
  // Columns 6-8: reserved - allocated, segments, largest free block. At 0.1 s PyTorch has not reported
  // yet (reserved 0) and the allocation holds no block, so it is not a segment yet.
  EXPECT_EQ(test::memtrace_stdout("timeline " + path + " --csv"),
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes\n"
            "0.100000000,0,0,0,4194304,0,0,0\n"
            "0.200000000,0,1048576,4194304,4194304,3145728,1,3145728\n"
            "0.300000000,0,2097152,4194304,4194304,2097152,1,1048576\n"
            "1.200000000,0,1048576,4194304,4194304,3145728,1,2097152\n");
  // Per second: the first row holds the interval's highest totals and the fragmentation at its last
  // change (0.3 s), the second the state at 1.2 s.
  EXPECT_EQ(test::memtrace_stdout("timeline " + path + " --csv --interval 1"),
            "time_s,device,allocated_bytes,reserved_bytes,driver_bytes,reserved_minus_allocated_bytes,segment_count,"
            "largest_free_block_bytes\n"
            "0.300000000,0,2097152,4194304,4194304,2097152,1,1048576\n"
            "1.200000000,0,1048576,4194304,4194304,3145728,1,2097152\n");
  nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("timeline " + path + " --json"));
  EXPECT_EQ(j["rows"][3]["largest_free_block_bytes"], 2 * kMiB);
  EXPECT_EQ(j["trace"]["start_monotonic_ns"], 1'000'000'000);
}

TEST(ReportCategories, SummaryShowsFragmentationAtThePeakAndAtTheEnd) {
  std::string path = fragmenting_trace();
  nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("summary " + path + " --json"));
  EXPECT_EQ(j["trace"]["start_monotonic_ns"], 1'000'000'000);  // TraceBuilder::start's default
  const nlohmann::json& f = j["devices"][0]["fragmentation"];
  // Peak allocated 2 MiB at 0.3 s: 4 - 2 = 2 MiB free, largest piece 1 MiB. End: 3 MiB free, 2 MiB piece.
  EXPECT_EQ(f["at_peak_allocated"], (nlohmann::json{{"reserved_minus_allocated_bytes", 2 * kMiB},
                                                    {"segments_known", true},
                                                    {"segment_count", 1},
                                                    {"largest_free_block_bytes", kMiB}}));
  EXPECT_EQ(f["final"]["largest_free_block_bytes"], 2 * kMiB);
  EXPECT_EQ(f["final"]["reserved_minus_allocated_bytes"], 3 * kMiB);
  std::string text = test::memtrace_stdout("summary " + path);
  EXPECT_NE(text.find("  fragmentation at peak allocated: reserved - allocated 2.00 MiB (2,097,152 B), 1 segment, "
                      "largest free block 1.00 MiB (1,048,576 B)\n"),
            std::string::npos)
      << text;
}

TEST(ReportCategories, SummaryReportsCategoriesHostMemoryAndDeviceUsage) {
  proto::Event pinned = test::driver_alloc(0, 0x7f0000000000, 8 * kMiB, 1000, 0, proto::CUDA_MALLOC_HOST);
  pinned.set_memory(proto::MEMORY_HOST_PINNED);
  proto::Event array = test::driver_alloc(0, 0x5000, 2 * kMiB, 1000, 0, proto::CU_ARRAY_CREATE);
  array.set_memory(proto::MEMORY_ARRAY);
  proto::Event usage = test::make_event(proto::DEVICE_USAGE, proto::LAYER_UNKNOWN, proto::NVML_SAMPLE, 0, 0, 0, 1000);
  usage.set_device_free_bytes(900 * kMiB);
  usage.set_device_total_bytes(1024 * kMiB);
  usage.set_process_used_bytes(100 * kMiB);
  usage.set_other_processes_used_bytes(24 * kMiB);
  test::TraceBuilder b;
  b.start().event(pinned).event(array).event(test::driver_alloc(0, 0x200000, 3 * kMiB, 1000)).event(usage).end_chunk();
  std::string path = test::temp_path("categories.mtrace");
  test::write_file(path, b.bytes());
  nlohmann::json j = nlohmann::json::parse(test::memtrace_stdout("summary " + path + " --json"));
  const nlohmann::json& d = j["devices"][0];
  EXPECT_EQ(d["final_driver_bytes"], 5 * kMiB);  // 2 MiB array + 3 MiB cudaMalloc; pinned host not charged
  EXPECT_EQ(d["final_array_bytes"], 2 * kMiB);
  EXPECT_EQ(j["process"]["host_pinned_bytes"], 8 * kMiB);
  // NVML: process 100 MiB = accounted 5 MiB + 95 MiB context and unattributed.
  const nlohmann::json& u = d["device_usage"]["last"];
  EXPECT_EQ(u["accounted_bytes"], 5 * kMiB);
  EXPECT_EQ(u["context_and_unattributed_bytes"], 95 * kMiB);
  EXPECT_EQ(u["other_processes_used_bytes"], 24 * kMiB);
  EXPECT_EQ(u["device_total_bytes"], 1024 * kMiB);
  std::string text = test::memtrace_stdout("summary " + path);
  EXPECT_NE(text.find("  arrays 2.00 MiB (2,097,152 B) (peak 2.00 MiB (2,097,152 B))\n"), std::string::npos) << text;
  EXPECT_NE(text.find("process 100.00 MiB (104,857,600 B) = accounted 5.00 MiB (5,242,880 B) + context and "
                      "unattributed 95.00 MiB (99,614,720 B); other processes 24.00 MiB (25,165,824 B)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  pinned host             8.00 MiB (8,388,608 B) at end"), std::string::npos) << text;
}

}  // namespace
}  // namespace memtrace
