// gen_fleet: writes the traces of one torchrun-like data-parallel training job, one trace per rank, for
// the many-trace benchmark (bench/fleet_summary).
//
//   gen_fleet DIR [--ranks N] [--events E] [--leak-rank R] [--threads T]
//
// N ranks (default 1024), 8 per host (hosts node000, node001, ...), each with about E events (default
// 1,000,000: whole training steps, until E is reached). Rank r runs on host r / 8 as local rank r % 8 on
// CUDA device r % 8 (ordinal = LOCAL_RANK, as torch.cuda.set_device(local_rank) does), pid 50000 + r,
// parent the host's torchrun agent (pid 1000 + host). Its trace, DIR/nodeHHH.PID.mtrace (format version
// 3), holds:
//   - TraceStart with pid, ppid, hostname, argv, RANK / LOCAL_RANK / WORLD_SIZE, the job id (torchrun's
//     run id "fleet-bench"), start_unix_ns 2026-12-01 00:00:00 UTC plus 1.5 ms per host, 0.4 ms per local
//     rank and up to 0.3 ms more (ranks start a few ms apart);
//   - one Device record: ordinal r % 8, "NVIDIA H200", 143,771 MiB, a UUID distinct per (host, local rank);
//   - the call stacks: 4 Python frames (train.py, model.py, torch/optim/adam.py) above 6 native frames;
//   - a training loop through PyTorch's caching allocator (bench/trace_writer.h TorchWorkload: blocks in
//     2 MiB driver segments, the allocator's totals): 12 layers' parameters, then per step a forward
//     (each layer's activation kept for backward, a temporary freed at once), the loss, a backward (each
//     layer's weight and bias gradients, a temporary, the activation freed), Adam (its two state tensors
//     per parameter made at the first step, a temporary per layer), the loss freed and zero_grad freeing
//     the gradients; every 64 steps an NVML sample of the device (DEVICE_USAGE: the allocator's reserved
//     bytes plus a 512 MiB context used by this process, nothing by others). One event per microsecond.
//   - Rank R (default 3; --leak-rank N to have none) keeps each step's 512-byte loss block (a
//     `losses.append(loss)` on the GPU): a leak of 512 bytes per step, from its own call site.
//   - a TraceEnd.
// Every rank of one local rank runs the same steps, so a trace's records after its TraceStart and Device
// record depend only on (local rank, leaking or not): each such body is made and compressed once, then
// copied behind every trace's own first chunk; T threads (default: the cores) make the bodies, then write
// the files. Prints one line: the traces, the events per trace and in all, the bytes written.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "memtrace.pb.h"
#include "trace_writer.h"

namespace {

namespace proto = memtrace::proto;
using memtrace_bench::TorchWorkload;
using memtrace_bench::TraceWriter;
using proto::Record;

constexpr uint32_t kRanksPerHost = 8;
constexpr uint32_t kLayers = 12;
constexpr uint64_t kStartUnixNs = 1'796'083'200'000'000'000ull;              // 2026-12-01 00:00:00 UTC
constexpr uint64_t kDeviceTotalBytes = 143'771ull << 20;                     // an H200 as cuDeviceTotalMem reports it
constexpr uint64_t kContextBytes = 512ull << 20;                             // what NVML counts beyond the allocator
constexpr uint64_t kLiveBase = 0x7f0000000000, kChurnBase = 0x7e0000000000;  // regions differ in bit 40
constexpr uint64_t kLossBytes = 512;
constexpr uint32_t kSampleEverySteps = 64;

struct Options {
  std::string dir;
  uint32_t ranks = 1024;
  uint64_t events = 1'000'000;
  int64_t leak_rank = 3;  // -1: none
  uint32_t threads = std::max(1u, std::thread::hardware_concurrency());
};

// The call sites: each a Stack of native frames (the allocator's, in libc10_cuda.so) under Python frames.
enum Site : uint64_t {
  kParamInit = 1,  // + layer % 3 (three kinds of layers: distinct Python lines)
  kForwardActivation = 4,
  kForwardTemporary = 7,
  kGradWeight = 10,
  kGradBias = 13,
  kGradTemporary = 16,
  kAdamState = 19,
  kAdamTemporary = 22,
  kLoss = 25,
  kLeakedLoss = 26,
  kSiteCount = 26,
};

struct PyFrame {
  uint64_t id;
  const char* file;
  const char* function;
  uint32_t line;
};
// Innermost last in each site's list below: ids into this table.
constexpr PyFrame kPyFrames[] = {
    {1, "train.py", "<module>", 212},
    {2, "train.py", "main", 188},
    {3, "train.py", "train_step", 141},
    {4, "train.py", "build_model", 97},
    {5, "model.py", "Block.__init__", 31},
    {6, "model.py", "Block.forward", 44},
    {7, "model.py", "Block.forward", 46},
    {8, "model.py", "Block.forward", 48},
    {9, "torch/autograd/graph.py", "_engine_run_backward", 825},
    {10, "torch/optim/adam.py", "_init_group", 163},
    {11, "torch/optim/adam.py", "_multi_tensor_adam", 540},
    {12, "train.py", "train_step", 146},  // loss = criterion(...)
    {13, "train.py", "train_step", 152},  // losses.append(loss): the leak
};

// The Python frames of `site`, outermost first.
std::vector<uint64_t> python_frames(uint64_t site) {
  if (site == kLoss) return {1, 2, 12};
  if (site == kLeakedLoss) return {1, 2, 13};
  uint64_t kind = (site - 1) / 3, variant = (site - 1) % 3;
  switch (kind) {
    case 0: return {1, 2, 4, 5};
    case 1:
    case 2: return {1, 2, 3, 6 + variant};
    case 3:
    case 4:
    case 5: return {1, 2, 3, 9};
    case 6: return {1, 2, 3, 10};
    default: return {1, 2, 3, 11};
  }
}

void write_stacks(TorchWorkload& w) {
  for (const PyFrame& f : kPyFrames) {
    Record r;
    auto* p = r.mutable_python_frame();
    p->set_id(f.id);
    p->set_file(f.file);
    p->set_function(f.function);
    p->set_line(f.line);
    w.add(r);
  }
  for (uint64_t site = 1; site <= kSiteCount; ++site) {
    Record r;
    auto* s = r.mutable_stack();
    s->set_id(site);
    // Innermost first: the allocator's frames (shared by every site), a per-site frame of the op, then Python.
    for (uint64_t k = 0; k < 5; ++k) s->add_frames(0x7f1200001000 + k * 0x140);
    s->add_frames(0x7f1300000000 + site * 0x40);
    std::vector<uint64_t> py = python_frames(site);
    for (auto it = py.rbegin(); it != py.rend(); ++it) s->add_frames(1ull << 63 | *it);
    w.add(r);
  }
}

// Addresses of one region handed out in increasing order, 512-byte aligned (as PyTorch rounds block sizes),
// a block never crossing a 2 MiB segment boundary.
class Bump {
 public:
  explicit Bump(uint64_t base) : next_(base) {}
  uint64_t take(uint64_t size) {
    size = (size + 511) & ~uint64_t{511};
    const uint64_t seg = TorchWorkload::kSegment;
    if ((next_ & (seg - 1)) + size > seg) next_ = (next_ + seg - 1) & ~(seg - 1);
    uint64_t at = next_;
    next_ += size;
    return at;
  }

 private:
  uint64_t next_;
};

// A block: where it is and how large.
struct Block {
  uint64_t address = 0, size = 0;
};

// One rank's training loop through the caching allocator of `device`; `leaks`: it keeps each step's loss.
class TrainingLoop {
 public:
  TrainingLoop(TorchWorkload& w, int32_t device, bool leaks)
      : w_(w), device_(device), leaks_(leaks), random_(0x9e3779b97f4a7c15ull + uint64_t(device) * 2 + leaks) {
    w_.start_region(kLiveBase);
    w_.start_region(kChurnBase);
    for (uint32_t l = 0; l < kLayers; ++l) {
      activation_[l].size = (256 << 10) * (1 + l % 3);
      grad_weight_[l].size = 1 << 20;
      grad_bias_[l].size = 4096;
    }
  }

  // Parameters: per layer a weight (1 MiB) and a bias (4 KiB), live to the end.
  void build_model() {
    for (uint32_t l = 0; l < kLayers; ++l) {
      weight_[l] = place_live(1 << 20);
      bias_[l] = place_live(4096);
      w_.alloc(weight_[l].address, weight_[l].size, kParamInit + l % 3);
      w_.alloc(bias_[l].address, bias_[l].size, kParamInit + l % 3);
    }
  }

  void step(uint64_t step) {
    forward();
    backward();
    optimizer_step(step == 0);
    if (!leaks_) release(loss_);
    for (uint32_t l = 0; l < kLayers; ++l) {  // optimizer.zero_grad(set_to_none=True)
      release(grad_weight_[l]);
      release(grad_bias_[l]);
    }
    if (step % kSampleEverySteps == 0) sample();
  }

 private:
  // Each layer's activation, kept for backward, and a temporary freed at once; then the loss.
  void forward() {
    for (uint32_t l = 0; l < kLayers; ++l) {
      alloc(activation_[l], kForwardActivation + l % 3, l == 0 ? int64_t(1500 + next_random() % 500) : 0);
      alloc(forward_temporary_, kForwardTemporary + l % 3);
      release(forward_temporary_);
    }
    if (leaks_) {  // a kept loss needs a block of its own, never freed
      Block kept = place_live(kLossBytes);
      w_.alloc(kept.address, kept.size, kLeakedLoss);
    } else {
      alloc(loss_, kLoss);
    }
  }
  // From the last layer: its gradients, a temporary, its activation freed.
  void backward() {
    for (uint32_t l = kLayers; l-- > 0;) {
      alloc(grad_weight_[l], kGradWeight + l % 3);
      alloc(grad_bias_[l], kGradBias + l % 3);
      alloc(grad_temporary_, kGradTemporary + l % 3);
      release(grad_temporary_);
      release(activation_[l]);
    }
  }
  // Adam: at the first step its exp_avg and exp_avg_sq of each parameter (made lazily, live to the end); a
  // temporary per layer.
  void optimizer_step(bool first) {
    for (uint32_t l = 0; l < kLayers; ++l) {
      if (first) {
        for (const Block& param : {weight_[l], weight_[l], bias_[l], bias_[l]}) {
          Block state = place_live(param.size);
          w_.alloc(state.address, state.size, kAdamState + l % 3);
        }
      }
      alloc(adam_temporary_, kAdamTemporary + l % 3);
      release(adam_temporary_);
    }
  }
  // NVML's view of the device: the allocator's segments and the context, by this process only.
  void sample() {
    Record r;
    auto* e = r.mutable_event();
    e->set_kind(proto::DEVICE_USAGE);
    e->set_api(proto::NVML_SAMPLE);
    e->set_tid(2);  // the tracer's writer thread
    e->set_device(device_);
    e->set_time_delta_us(1);
    uint64_t used = w_.reserved_bytes() + kContextBytes;
    e->set_device_total_bytes(kDeviceTotalBytes);
    e->set_device_free_bytes(kDeviceTotalBytes - used);
    e->set_process_used_bytes(used);
    e->set_other_processes_used_bytes(0);
    w_.add(r);
  }

  // A block of the live region is placed when made. One of the churn region is placed at its first use, so
  // that segments are made in increasing address order (TorchWorkload); the caching allocator hands the same
  // block back at every step after.
  Block place_live(uint64_t size) { return Block{live_.take(size), size}; }
  // The time before it: `gap_us`, else 1 to 24 us (kernels between allocations).
  void alloc(Block& b, uint64_t site, int64_t gap_us = 0) {
    if (b.address == 0) b.address = churn_.take(b.size);
    w_.set_next_delta_us(gap_us ? gap_us : int64_t(1 + next_random() % 24));
    w_.alloc(b.address, b.size, site);
  }
  void release(const Block& b) {
    w_.set_next_delta_us(int64_t(1 + next_random() % 24));
    w_.free(b.address, b.size);
  }
  // A fixed pseudo-random sequence (a 64-bit LCG's high bits): the times between events.
  uint64_t next_random() { return (random_ = random_ * 6364136223846793005ull + 1442695040888963407ull) >> 33; }

  TorchWorkload& w_;
  int32_t device_;
  bool leaks_;
  uint64_t random_;
  Bump live_{kLiveBase}, churn_{kChurnBase};
  Block weight_[kLayers], bias_[kLayers], activation_[kLayers];
  Block grad_weight_[kLayers], grad_bias_[kLayers];
  Block forward_temporary_{0, 64 << 10}, grad_temporary_{0, 768 << 10}, adam_temporary_{0, 1 << 20};
  Block loss_{0, kLossBytes};
};

// One rank's records after its TraceStart and Device: the stacks, the training loop (whole steps until
// `target_events`), the TraceEnd. Returns the compressed chunks and the event count.
std::pair<std::string, uint64_t> make_body(int32_t device, bool leaks, uint64_t target_events) {
  TraceWriter trace(3);
  TorchWorkload w(trace, device);
  write_stacks(w);
  TrainingLoop loop(w, device, leaks);
  loop.build_model();
  for (uint64_t step = 0; w.events() < target_events; ++step) loop.step(step);
  Record end;
  end.mutable_end()->set_events(w.events());
  end.mutable_end()->set_time_delta_us(1);
  trace.add(end);
  return {trace.take_output(), w.events()};
}

std::string hostname(uint32_t host) {
  char name[32];
  std::snprintf(name, sizeof name, "node%03u", host);
  return name;
}

// Rank r's first chunk: its TraceStart and its device.
void write_rank(const Options& o, uint32_t rank, const std::string& body) {
  const uint32_t host = rank / kRanksPerHost, local = rank % kRanksPerHost;
  const uint32_t pid = 50000 + rank, agent_pid = 1000 + host;
  std::string path = o.dir + "/" + hostname(host) + "." + std::to_string(pid) + ".mtrace";
  TraceWriter trace(path.c_str(), 3);
  Record start;
  auto* s = start.mutable_start();
  s->set_pid(pid);
  s->set_ppid(agent_pid);
  s->set_hostname(hostname(host));
  for (const char* a : {"/usr/bin/python3", "-u", "train.py", "--epochs", "1"}) s->add_argv(a);
  s->set_start_monotonic_ns(3'600'000'000'000ull * (1 + host % 5) + local * 400'000ull);
  s->set_start_unix_ns(kStartUnixNs + host * 1'500'000ull + local * 400'000ull + (rank * 7919ull) % 300'000);
  s->set_tracer_version("bench");
  s->set_flush_interval_ms(1000);
  s->set_python_frames(0x030c01f0);  // CPython 3.12.1
  s->set_rank(rank);
  s->set_local_rank(local);
  s->set_world_size(o.ranks);
  s->set_job_id("fleet-bench");
  s->set_job_id_source(proto::TraceStart::TORCHELASTIC_RUN_ID);
  trace.add(start);
  Record device;
  auto* d = device.mutable_device();
  d->set_ordinal(local);
  uint8_t uuid[16] = {0x6b, 0x1e, 0x2a, 0x90, 0xc4, 0x11, 0x4e, 0x5f, 0x9a, 0x3d, 0, 0, 0, 0, 0, 0};
  uuid[12] = uint8_t(host >> 8);
  uuid[13] = uint8_t(host);
  uuid[15] = uint8_t(local);
  d->set_uuid(uuid, sizeof uuid);
  d->set_name("NVIDIA H200");
  d->set_total_bytes(kDeviceTotalBytes);
  trace.add(device);
  trace.append_chunks(body);
}

// Runs job(i) for i in [0, n) on `threads` threads.
template <class Job>
void parallel_for(uint32_t n, uint32_t threads, Job job) {
  std::atomic<uint32_t> next{0};
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < std::min(threads, n); ++t)
    pool.emplace_back([&] {
      for (uint32_t i; (i = next++) < n;) job(i);
    });
  for (auto& t : pool) t.join();
}

bool parse(int argc, char** argv, Options& o) {
  if (argc < 2 || argv[1][0] == '-') return false;
  o.dir = argv[1];
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    char* end = nullptr;
    long long v = std::strtoll(argv[i + 1], &end, 10);
    if (*end != '\0' || end == argv[i + 1]) return false;
    if (!std::strcmp(argv[i], "--ranks") && v > 0 && v < (1 << 20)) o.ranks = uint32_t(v);
    else if (!std::strcmp(argv[i], "--events") && v > 0) o.events = uint64_t(v);
    else if (!std::strcmp(argv[i], "--leak-rank") && v >= -1) o.leak_rank = v;
    else if (!std::strcmp(argv[i], "--threads") && v > 0 && v <= 256) o.threads = uint32_t(v);
    else return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: gen_fleet DIR [--ranks N] [--events E] [--leak-rank R | -1] [--threads T]\n");
    return 2;
  }
  // The bodies: one per (local rank, leaking), made in parallel.
  std::map<std::pair<uint32_t, bool>, size_t> index;
  std::vector<std::pair<uint32_t, bool>> kinds;
  for (uint32_t r = 0; r < o.ranks; ++r) {
    std::pair<uint32_t, bool> kind{r % kRanksPerHost, int64_t(r) == o.leak_rank};
    if (index.emplace(kind, kinds.size()).second) kinds.push_back(kind);
  }
  std::vector<std::pair<std::string, uint64_t>> bodies(kinds.size());
  parallel_for(uint32_t(kinds.size()), o.threads,
               [&](uint32_t i) { bodies[i] = make_body(int32_t(kinds[i].first), kinds[i].second, o.events); });
  parallel_for(o.ranks, o.threads, [&](uint32_t r) {
    write_rank(o, r, bodies[index.at({r % kRanksPerHost, int64_t(r) == o.leak_rank})].first);
  });
  uint64_t events = 0, bytes = 0;
  for (uint32_t r = 0; r < o.ranks; ++r) {
    const auto& body = bodies[index.at({r % kRanksPerHost, int64_t(r) == o.leak_rank})];
    events += body.second;
    bytes += body.first.size();
  }
  std::printf("%s: %u traces, %llu events each (rank 0), %llu events in all, %llu bytes of chunks\n", o.dir.c_str(),
              o.ranks, (unsigned long long)bodies[0].second, (unsigned long long)events, (unsigned long long)bytes);
  return 0;
}
