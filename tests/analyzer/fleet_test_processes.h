// Hand-built ProcessSummary values for the fleet tests (fleet_test.cc, fleet_text_test.cc): a process on a host
// with a lifetime, and a rank's process with one device. Times are wall-clock ns from kT.
#pragma once

#include <cstdint>
#include <string>

#include "fleet/process_summary.h"

namespace memtrace::test::fleet {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;
inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint64_t kS = 1'000'000'000;
// 2026-12-02 10:00:00 UTC.
inline constexpr uint64_t kT = 1'796'205'600ull * kS;
inline const std::string kGpuA = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
inline const std::string kGpuB = "GPU-bbbbbbbb-0000-0000-0000-000000000001";

inline ProcessSummary process(uint32_t pid, uint32_t ppid, const std::string& host, uint64_t start_unix_ns,
                              uint64_t end_unix_ns) {
  ProcessSummary p;
  p.trace = "trace." + std::to_string(pid) + ".mtrace";
  p.pid = pid;
  p.ppid = ppid;
  p.host = host;
  p.argv = {"python", "train.py"};
  p.start_unix_ns = start_unix_ns;
  p.end_unix_ns = end_unix_ns;
  return p;
}

// Device `ordinal` of an H200 with one allocation; its first allocation time unset (the process's start counts).
inline ProcessDevice device(int32_t ordinal, const std::string& gpu, uint64_t peak_allocated_bytes,
                            uint64_t peak_unix_ns, uint64_t peak_reserved_bytes) {
  ProcessDevice d;
  d.ordinal = ordinal;
  d.gpu = gpu;
  d.name = "NVIDIA H200";
  d.total_bytes = 140 * kGiB;
  d.peak_allocated = {peak_allocated_bytes, peak_unix_ns};
  d.peak_reserved = {peak_reserved_bytes, peak_unix_ns};
  d.allocations = 1;
  return d;
}

// Rank `rank` (local rank the same, world size 2) started at `start_unix_ns`, alive for 10 s, using `ordinal`.
inline ProcessSummary rank_process(uint32_t rank, uint32_t pid, uint64_t start_unix_ns, int32_t ordinal,
                                   const std::string& gpu, uint64_t peak_allocated_bytes, uint64_t peak_unix_ns,
                                   uint64_t peak_reserved_bytes, const std::string& host = "node1") {
  ProcessSummary p = process(pid, 1, host, start_unix_ns, start_unix_ns + 10 * kS);
  p.rank = rank;
  p.local_rank = rank;
  p.world_size = 2;
  p.devices.push_back(device(ordinal, gpu, peak_allocated_bytes, peak_unix_ns, peak_reserved_bytes));
  return p;
}

}  // namespace memtrace::test::fleet
