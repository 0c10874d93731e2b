// Many processes in one view: the processes of a job (torchrun ranks, DataLoader workers and other children)
// and whoever else shared its GPUs, from each process's ProcessSummary (process_summary.h). What it answers:
//   - per physical GPU (by UUID, whatever ordinal each process gave it): the processes that used it, each with
//     its peaks and when, and the memory other processes held that no trace accounts for ("untraced
//     processes", from the NVML samples the traces hold);
//   - per rank: the figures side by side, the worst rank named, the spread between ranks;
//   - processes that allocated on a GPU other than their rank's local device (every rank also touching
//     cuda:0), with the call site of their first allocation there;
//   - the process tree: each process under its traced parent (DataLoader workers under their trainer);
//   - leak candidates merged by portable call site across processes.
// Built from summaries only, so it is the same whether they came from traces read here or from `summary --json`
// files (`memtrace merge`). What needs the traces themselves (the combined timeline of a shared GPU,
// combined_timeline.h) is added by the caller where it has them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fleet/combined_timeline.h"
#include "fleet/process_summary.h"

namespace memtrace {

// One process's use of one GPU.
struct GpuUser {
  size_t process = 0;  // index into FleetView::processes
  int32_t ordinal = -1;
  TimedBytes peak_allocated;
  TimedBytes peak_reserved;
};

// Memory on a GPU that no traced process accounts for, from the NVML samples of the traced processes on it: at a
// sample of process P, NVML's other_processes_used_bytes minus what the other traced processes on the GPU used
// at that moment (their own process_used_bytes, from their sample nearest in time, within one second; 0 for one
// not alive then). A sample at which another traced process was alive but has no sample within the second is
// not judged (what it held then is unknown). The largest such figure, when, and which traced process's sample
// says so; set where that figure is above 0 or NVML named untraced pids.
struct UntracedMemory {
  uint64_t bytes = 0;
  uint64_t unix_ns = 0;
  size_t seen_by = 0;  // index into FleetView::processes
  // NVML's pids on the GPU (ProcessDevice::nvml_other_pids of its users) that no traced process on the host
  // has, ascending.
  std::vector<uint32_t> pids;
};

inline constexpr uint64_t kSampleMatchNs = 1'000'000'000;  // "at that moment" for samples of two processes

struct GpuView {
  std::string gpu;       // "GPU-xxxxxxxx-...", or "" when known only by host and ordinal
  std::string host;      // the host of its first user (a UUID names one card in the world; without one, the host does)
  int32_t ordinal = -1;  // the ordinal of its first user, for a GPU known only by host and ordinal
  std::string name;
  uint64_t total_bytes = 0;
  std::vector<GpuUser> users;  // by process index (then ordinal)
  // The largest sum of the users' own peaks: an upper bound of the combined peak (the peaks need not coincide);
  // exact figures need the traces (combined).
  uint64_t sum_of_peak_allocated_bytes = 0;
  uint64_t sum_of_peak_reserved_bytes = 0;
  std::optional<UntracedMemory> untraced;
  std::optional<CombinedTimeline> combined;  // set by the caller where it read the traces (2 users or more)
};

// One rank's figures: its process's peak over its devices (the device with the highest peak allocated; ties: the
// lowest ordinal). gpu "" and ordinal -1 for a process that used no device.
struct RankRow {
  uint32_t rank = 0;
  size_t process = 0;
  std::string gpu;
  int32_t ordinal = -1;
  TimedBytes peak_allocated;
  TimedBytes peak_reserved;
  uint64_t leaked_bytes = 0;  // sum of the process's leak candidates
  uint64_t ooms = 0;          // over all its devices
};

// The ranks side by side: rows by rank (then process index), one per process with a rank except where its traced
// parent has the same rank (a DataLoader worker inherits RANK: it is its trainer's child, not a rank); the worst
// rank (highest peak allocated; ties: lowest rank) and the spread (largest minus smallest peak allocated, and the
// same of reserved). Empty where no process has a rank.
struct RankTable {
  std::vector<RankRow> rows;
  std::optional<size_t> worst;  // index into rows
  uint64_t peak_allocated_spread_bytes = 0;
  uint64_t peak_reserved_spread_bytes = 0;
  uint64_t median_peak_allocated_bytes = 0;  // the lower middle of an even count
};

// A process that allocated on a GPU that is not its rank's local device. The local device is the ordinal equal to
// its local rank where the process used that ordinal (torchrun's convention: torch.cuda.set_device(LOCAL_RANK)),
// else the device where it peaked highest. Only processes with a rank or local rank; a device counts as touched
// where the process allocated or reserved anything there. In process order, then ordinal.
struct WrongDevice {
  size_t process = 0;
  int32_t ordinal = -1;  // the device it should not have touched
  std::string gpu;
  int32_t local_ordinal = -1;  // its own
  uint64_t peak_allocated_bytes = 0;
  uint64_t first_allocation_unix_ns = 0;
  std::string first_allocation_site;
};

// Leak candidates of many processes merged by portable call site (ProcessLeak::site_key).
struct MergedLeak {
  std::string site_key;
  std::string site;  // the first process's name for it
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::vector<size_t> processes;  // indices into FleetView::processes, ascending
};

struct FleetView {
  std::vector<ProcessSummary> processes;  // sorted by host, then start time, then pid, then trace
  // The earliest start_unix_ns among the processes (0 where none has a start record): the reports' time zero.
  uint64_t first_start_unix_ns = 0;
  // The traced parent of each process (index into processes), where one was traced: same host, its pid equal to
  // the child's ppid and alive when the child started (started no later, its last event no earlier), so a
  // reused pid is not taken for the parent. A parent sorts before its child (it started first; same start: lower
  // pid), which keeps the tree free of cycles whatever the summaries say.
  std::vector<std::optional<size_t>> parent;
  // By host, then first use (the earliest first allocation of a user on it; a user without one counts from its
  // start), then UUID, then ordinal.
  std::vector<GpuView> gpus;
  RankTable ranks;
  std::vector<WrongDevice> wrong_devices;
  std::vector<MergedLeak> leaks;  // largest bytes first (ties: site key)
  // Summaries of a process already in `processes` (same host, pid and start time, the start known): the same
  // trace named twice (through another path, a link, a copy), or a summary file given to `merge` beside one that
  // holds it. Counted once; these are their traces, in the order given.
  std::vector<std::string> duplicates;
};

// Groups the summaries. Never throws for summaries summarize_process or process_summary_from_json made.
FleetView build_fleet(std::vector<ProcessSummary> processes);

// Sets GpuView::combined of every GPU with two users or more, reading their traces again (combined_timeline.h:
// members in the order of GpuView::users, the series thinned to `max_points` >= 2). Only for a view built from
// traces, not from summary files. A GPU whose traces cannot be combined (one no longer reads, or has no wall-clock
// start) keeps no combined timeline; the returned lines say which and why ("GPU-...: <reason>"), one per GPU.
std::vector<std::string> add_combined_timelines(FleetView& view, size_t max_points);

}  // namespace memtrace
