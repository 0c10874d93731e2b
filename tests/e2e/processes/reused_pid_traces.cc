// Writes, with tests/analyzer/trace_builder.h, the traces of processes whose pids were reused (hard to force with
// real processes): reused_pid_traces DIR writes DIR/a.mtrace ... DIR/f.mtrace. Times are milliseconds after
// T0 = 1,800,000,000 s on the wall clock (start_unix_ns); MiB = 1048576 bytes. Each trace: a TraceStart, the Device
// record of each device it uses, its driver allocations (cudaMalloc / cudaFree), a TraceEnd (exit).
//   file  host   pid  ppid  start  events (device: at ms)                         end
//   a     hostA  100  1     0      0: alloc 10 MiB at 0, free it at 1            2
//   b     hostA  200  100   0.5    0: alloc 3 MiB at 0.5                          1.5
//   c     hostA  400  100   5      0: alloc 1 MiB at 5                            6     (pid 100 dead then)
//   d     hostA  100  1     10     1: alloc 7 MiB at 10, alloc 1 MiB at 11        12    (pid 100 again)
//   e     hostA  300  100   11     1: alloc 2 MiB at 11                           11.5  (child of d, not a)
//   f     hostB  200  100   0.5    0: alloc 4 MiB at 0.5                          1     (no pid 100 on hostB)
// GPUs: hostA's devices 0 and 1, hostB's device 0, each with its own UUID: 16 bytes, the first 15 of them the
// host's letter ('A' or 'B') repeated, the last the ordinal.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trace_builder.h"

namespace {

using memtrace::proto::Record;
using memtrace::test::TraceBuilder;

constexpr uint64_t kT0UnixNs = 1'800'000'000'000'000'000ull;
constexpr uint64_t kMiB = 1 << 20;

struct Alloc {
  int32_t device;
  uint64_t bytes;
  uint64_t at_us;   // microseconds after T0
  int64_t free_us;  // -1: never freed
};

struct Process {
  const char* file;
  const char* host;
  uint32_t pid, ppid;
  uint64_t start_us, end_us;
  std::vector<Alloc> allocs;
};

Record device_record(const std::string& host, int32_t ordinal) {
  Record r;
  r.mutable_device()->set_ordinal(uint32_t(ordinal));
  std::string uuid(15, host.back());
  uuid.push_back(char(ordinal));
  r.mutable_device()->set_uuid(uuid);
  r.mutable_device()->set_name("Fake GPU");
  r.mutable_device()->set_total_bytes(1ull << 30);
  return r;
}

// The trace of `p`: events in time order, each address its own (0x10000000 per allocation).
std::string build(const Process& p) {
  TraceBuilder t;  // format version 1: times in nanoseconds
  Record start;
  auto* s = start.mutable_start();
  s->set_pid(p.pid);
  s->set_ppid(p.ppid);
  s->set_hostname(p.host);
  s->add_argv("worker");
  s->set_start_monotonic_ns(1'000'000'000);
  s->set_start_unix_ns(kT0UnixNs + p.start_us * 1000);
  t.record(start);
  struct Change {
    uint64_t at_us;
    bool alloc;
    size_t index;
  };
  std::vector<Change> changes;
  std::vector<bool> described(2, false);
  for (size_t i = 0; i < p.allocs.size(); ++i) {
    changes.push_back({p.allocs[i].at_us, true, i});
    if (p.allocs[i].free_us >= 0) changes.push_back({uint64_t(p.allocs[i].free_us), false, i});
  }
  std::stable_sort(changes.begin(), changes.end(), [](const Change& x, const Change& y) { return x.at_us < y.at_us; });
  uint64_t now_us = p.start_us;
  for (const Change& c : changes) {
    const Alloc& a = p.allocs[c.index];
    if (c.alloc && !described[size_t(a.device)]) {
      t.record(device_record(p.host, a.device));
      described[size_t(a.device)] = true;
    }
    int64_t delta_ns = int64_t((c.at_us - now_us) * 1000);
    uint64_t address = 0x10000000 * (c.index + 1);
    t.event(c.alloc ? memtrace::test::driver_alloc(a.device, address, a.bytes, delta_ns)
                    : memtrace::test::driver_free(a.device, address, delta_ns));
    now_us = c.at_us;
  }
  t.end(changes.size(), int64_t((p.end_us - now_us) * 1000));
  t.end_chunk();
  return t.bytes();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: reused_pid_traces DIR\n");
    return 2;
  }
  const std::vector<Process> processes = {
      {"a", "hostA", 100, 1, 0, 2000, {{0, 10 * kMiB, 0, 1000}}},
      {"b", "hostA", 200, 100, 500, 1500, {{0, 3 * kMiB, 500, -1}}},
      {"c", "hostA", 400, 100, 5000, 6000, {{0, 1 * kMiB, 5000, -1}}},
      {"d", "hostA", 100, 1, 10000, 12000, {{1, 7 * kMiB, 10000, -1}, {1, 1 * kMiB, 11000, -1}}},
      {"e", "hostA", 300, 100, 11000, 11500, {{1, 2 * kMiB, 11000, -1}}},
      {"f", "hostB", 200, 100, 500, 1000, {{0, 4 * kMiB, 500, -1}}},
  };
  for (const Process& p : processes) {
    std::string path = std::string(argv[1]) + "/" + p.file + ".mtrace";
    memtrace::test::write_file(path, build(p));
  }
  std::printf("%zu traces in %s\n", processes.size(), argv[1]);
  return 0;
}
