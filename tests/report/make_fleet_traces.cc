// make_fleet_traces: writes the traces of a small torchrun job into DIR, for `memtrace report DIR/`'s tests
// (tests/report/CMakeLists.txt): two ranks on one host sharing GPU A, where rank 1 should use only its own GPU B,
// built with tests/analyzer/trace_builder.h. Wall-clock times from T = TraceStart.start_unix_ns of rank 0:
//
//   rank 0 (pid 1000, local rank 0) on GPU A as cuda:0:  T+10 ms +100 MiB, T+30 ms +200 MiB, T+50 ms -100 MiB
//   rank 1 (pid 1001, local rank 1), started at T+5 ms:  GPU B (cuda:1) T+10 ms +400 MiB;
//                                                        GPU A (cuda:0) T+20 ms +50 MiB (its wrong device)
//
// and both end at T+100 ms (rank 0's TraceEnd 50 ms after its last event, rank 1's 80 ms after its last),
// so GPU A's combined allocated is 100, 150, 350, 250 MiB at T+10, 20, 30, 50 ms, then 50 and 0 MiB at T+100 ms
// as each process ends (rank 0 first, the order of the users): its peak is 350 MiB at T+30 ms,
// rank 0 holding 300 MiB and rank 1 50 MiB; rank 1 is the worst rank (400 MiB against 300). Every allocation
// is made from train.py:31 main except rank 1's on GPU A, from train.py:12 setup. Only rank 0's first block is
// freed: rank 0 leaks 200 MiB, rank 1 450 MiB. check_fleet_traces.py checks the report's data for these figures.
//
//   make_fleet_traces DIR      exit 0; 2 with one line where a file cannot be written
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>

#include "../analyzer/trace_builder.h"

namespace {

using memtrace::proto::Record;
namespace test = memtrace::test;

constexpr uint64_t kT = 1'796'205'600'000'000'000ull;  // 2026-12-02 10:00:00 UTC
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kPy = 1ull << 63;  // a stack's Python frame ids carry this bit (proto/memtrace.proto)

Record start(uint32_t pid, uint32_t rank, uint64_t start_unix_ns) {
  Record r;
  auto* s = r.mutable_start();
  s->set_pid(pid);
  s->set_ppid(999);
  s->set_hostname("node1");
  s->set_start_monotonic_ns(1'000'000'000);
  s->set_start_unix_ns(start_unix_ns);
  s->add_argv("python");
  s->add_argv("train.py");
  s->set_rank(rank);
  s->set_local_rank(rank);
  s->set_world_size(2);
  s->set_job_id("job-7");
  return r;
}

// GPU A's UUID bytes are 0xa0.., GPU B's 0xb0..
Record device(int32_t ordinal, uint8_t uuid_high) {
  Record r;
  std::string uuid;
  for (int i = 0; i < 16; ++i) uuid += char(uuid_high + i);
  r.mutable_device()->set_ordinal(ordinal);
  r.mutable_device()->set_uuid(uuid);
  r.mutable_device()->set_name("NVIDIA H200");
  r.mutable_device()->set_total_bytes(150'000'000'000);
  return r;
}

// The call sites: stack 1 is train.py:31 main, stack 2 train.py:12 setup.
void stacks(test::TraceBuilder& b) {
  b.python_frame(1, "train.py", "main", 31).python_frame(2, "train.py", "setup", 12);
  b.stack(1, {kPy | 1}).stack(2, {kPy | 2});
}

bool write(const std::string& path, test::TraceBuilder& b) {
  b.end_chunk();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << b.bytes();
  out.close();
  if (!out) std::cerr << "make_fleet_traces: " << path << ": cannot write\n";
  return bool(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_fleet_traces DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  test::TraceBuilder r0;
  r0.record(start(1000, 0, kT)).record(device(0, 0xa0));
  stacks(r0);
  r0.event(test::driver_alloc(0, 0x1000000, 100 * kMiB, 10 * kMs, 1));
  r0.event(test::driver_alloc(0, 0x9000000, 200 * kMiB, 20 * kMs, 1));
  r0.event(test::driver_free(0, 0x1000000, 20 * kMs));
  r0.end(3, 50 * kMs);

  test::TraceBuilder r1;
  r1.record(start(1001, 1, kT + 5 * kMs)).record(device(0, 0xa0)).record(device(1, 0xb0));
  stacks(r1);
  r1.event(test::driver_alloc(1, 0x1000000, 400 * kMiB, 5 * kMs, 1));
  r1.event(test::driver_alloc(0, 0x2000000, 50 * kMiB, 10 * kMs, 2));
  r1.end(2, 80 * kMs);
  return write(dir + "/job-1000.mtrace", r0) && write(dir + "/job-1001.mtrace", r1) ? 0 : 2;
}
