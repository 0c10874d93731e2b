// One traced process as the many-process views need it (`memtrace summary A B C`, `summary DIR/`, `merge`): who it
// was (pid, parent, host, rank, job), which physical GPUs it used (by UUID, whatever CUDA_VISIBLE_DEVICES made of
// their ordinals), its figures on each (peaks with their wall-clock times, the end), where it first allocated on
// each, its OOMs, its leak candidates by portable call site, and what NVML said of the other processes on the
// device. Small and self-contained: no events, no stacks, nothing that points into a trace. This is one entry of
// the `processes` list `summary --json` writes (docs/many-processes.md), and what `memtrace merge` reads back,
// so summaries made where each rank's trace was written combine with traces read here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace memtrace {

struct Analysis;
class FrameResolver;

// A moment's figure: bytes, and when on the wall clock (CLOCK_REALTIME ns: TraceStart.start_unix_ns plus the
// event's time; 0 where the trace has no start record).
struct TimedBytes {
  uint64_t bytes = 0;
  uint64_t unix_ns = 0;
  bool operator==(const TimedBytes&) const = default;
};

// One NVML sample of a device as a traced process saw it (DEVICE_USAGE events with NVML's figures).
struct DeviceSample {
  uint64_t unix_ns = 0;
  uint64_t used_bytes = 0;                  // device_total_bytes - device_free_bytes
  uint64_t process_used_bytes = 0;          // this process, as NVML counts it (context included)
  uint64_t other_processes_used_bytes = 0;  // every other process NVML listed
  bool operator==(const DeviceSample&) const = default;
};

// One device (CUDA ordinal) a process used.
struct ProcessDevice {
  int32_t ordinal = -1;
  // The GPU as nvidia-smi names it: "GPU-" and the UUID's 16 bytes as 8-4-4-4-12 lower-case hex digits, from the
  // trace's Device record. Empty where the trace has none (older tracer, driver did not say): the device is then
  // known only as (host, ordinal).
  std::string gpu;
  std::string name;          // cuDeviceGetName, may be empty
  uint64_t total_bytes = 0;  // 0 = unknown
  TimedBytes peak_allocated;
  TimedBytes peak_reserved;
  uint64_t final_allocated_bytes = 0;
  uint64_t final_reserved_bytes = 0;
  uint64_t allocations = 0;  // allocated-kind allocations made on it
  // The first allocation on the device: when, and its call site as a reader sees it (the user's line where the
  // stack has one, else the innermost native frame; empty without a stack). What names "rank 3 also touched
  // GPU 0 from train.py:42".
  uint64_t first_allocation_unix_ns = 0;
  std::string first_allocation_site;
  uint64_t ooms = 0;
  // NVML samples, at most kMaxDeviceSamples (thinned evenly, the sample with the largest
  // other_processes_used_bytes always kept). Empty without NVML.
  std::vector<DeviceSample> samples;
  // The pids NVML listed on the device besides this process, over the whole trace (ascending, at most
  // kMaxDeviceSamples), where the tracer recorded them: they name the untraced processes (fleet.h).
  std::vector<uint32_t> nvml_other_pids;
  bool operator==(const ProcessDevice&) const = default;
};

inline constexpr size_t kMaxDeviceSamples = 1024;

// A leak candidate of the process (analysis LeakSite), named portably so that the same line in two processes is
// one site when merged.
struct ProcessLeak {
  int32_t device = -1;
  // The portable key of the call site as text (stacks/frame_key.h: Python frames by file:line function, native
  // frames by module build id or path and offset), equal across processes of one program.
  std::string site_key;
  std::string site;  // the call site as the text reports name it (the user's line)
  uint64_t bytes = 0;
  uint64_t count = 0;
  bool operator==(const ProcessLeak&) const = default;
};

// How a process's trace began where it began in the running process (TraceStart.origin other than LAUNCH): when,
// which attach of the process it was, and what was allocated before it (AttachFacts' allocated kind, every device).
struct ProcessAttach {
  std::string origin;           // "ATTACH_DORMANT", "ATTACH_INJECTED", "SNAPSHOT" (ORIGIN_N: one not known here)
  uint32_t attach_number = 0;   // 1 for the process's first attach
  uint64_t unix_ns = 0;         // the moment of attach: the trace's start (0 where it has none)
  uint64_t allocations = 0;     // listed one by one
  uint64_t bytes = 0;           // allocated before attach, the blocks not listed one by one included
  uint64_t unlisted_bytes = 0;  // of those, in blocks not listed one by one
  bool operator==(const ProcessAttach&) const = default;
};

struct ProcessSummary {
  std::string trace;  // the file it was read from (or the summary file it came from, for `merge`)
  uint32_t pid = 0;
  uint32_t ppid = 0;
  std::string host;
  std::optional<uint32_t> rank, local_rank, world_size;  // TraceStart's, from torchrun's RANK ...
  std::string job_id;
  std::vector<std::string> argv;
  uint64_t start_unix_ns = 0;
  uint64_t end_unix_ns = 0;  // of the last complete event (or the end record)
  bool truncated = false;
  std::optional<ProcessAttach> attach;  // where the trace began at an attach, not at launch
  std::vector<ProcessDevice> devices;   // by ordinal
  std::vector<ProcessLeak> leaks;      // largest bytes first, at most the `top_leaks` given to summarize_process
  // Over all its leak candidates, however many `leaks` keeps.
  uint64_t leaked_bytes = 0;
  uint64_t leak_sites = 0;
  bool operator==(const ProcessSummary&) const = default;
};

// Leak sites a summary keeps per process for the many-process views (whatever --top shows): enough that the sites
// merged across processes come out right for any site that is among the largest of some process.
inline constexpr size_t kLeakSitesKept = 100;

// The summary of one analyzed trace. `top_leaks`: leak sites kept. Never throws for any trace analyze_trace
// accepted.
ProcessSummary summarize_process(const Analysis& analysis, FrameResolver& resolver, size_t top_leaks);

// One `processes` entry of `summary --json` (docs/many-processes.md), and back. process_summary_from_json throws
// std::runtime_error naming what is missing or of the wrong type (the caller adds the file's name).
nlohmann::json process_summary_json(const ProcessSummary& process);
ProcessSummary process_summary_from_json(const nlohmann::json& entry);

}  // namespace memtrace
