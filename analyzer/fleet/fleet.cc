#include "fleet/fleet.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "util/checked_math.h"

namespace memtrace {
namespace {

// Hosts, then start, then pid, then the file: the same order whatever order the traces were listed or read in.
void sort_processes(std::vector<ProcessSummary>& processes) {
  std::stable_sort(processes.begin(), processes.end(), [](const ProcessSummary& a, const ProcessSummary& b) {
    return std::tie(a.host, a.start_unix_ns, a.pid, a.trace) < std::tie(b.host, b.start_unix_ns, b.pid, b.trace);
  });
}

uint64_t first_start(const std::vector<ProcessSummary>& processes) {
  uint64_t first = 0;
  for (const ProcessSummary& p : processes)
    if (p.start_unix_ns && (!first || p.start_unix_ns < first)) first = p.start_unix_ns;
  return first;
}

// Among the processes sorted before `child` on its host, the one holding its ppid when it started: the latest
// started of those whose pid is the ppid, if that one was still alive then. An earlier holder of the pid had
// died before the later one got it, so it cannot be the parent either.
std::optional<size_t> parent_of(const std::vector<ProcessSummary>& processes, size_t child) {
  const ProcessSummary& c = processes[child];
  std::optional<size_t> holder;
  for (size_t i = 0; i < child; ++i) {
    const ProcessSummary& p = processes[i];
    if (p.host == c.host && p.pid == c.ppid && p.pid != c.pid) holder = i;  // later ones sort later
  }
  if (!holder) return std::nullopt;
  const ProcessSummary& p = processes[*holder];
  if (p.start_unix_ns > c.start_unix_ns || p.end_unix_ns < c.start_unix_ns) return std::nullopt;
  return holder;
}

// A physical GPU: its UUID where the trace had one, else the host and the ordinal.
using GpuKey = std::tuple<std::string, std::string, int32_t>;

GpuKey gpu_key(const ProcessSummary& p, const ProcessDevice& d) {
  if (!d.gpu.empty()) return {d.gpu, "", -1};
  return {"", p.host, d.ordinal};
}

uint64_t first_use(const ProcessSummary& p, const ProcessDevice& d) {
  return d.allocations && d.first_allocation_unix_ns ? d.first_allocation_unix_ns : p.start_unix_ns;
}

std::vector<GpuView> group_gpus(const std::vector<ProcessSummary>& processes) {
  std::vector<GpuView> gpus;
  std::vector<uint64_t> first_use_ns;
  std::map<GpuKey, size_t> index;
  for (size_t i = 0; i < processes.size(); ++i) {
    const ProcessSummary& p = processes[i];
    for (const ProcessDevice& d : p.devices) {
      auto [it, added] = index.try_emplace(gpu_key(p, d), gpus.size());
      if (added) {
        GpuView g;
        g.gpu = d.gpu;
        g.host = p.host;
        g.ordinal = d.ordinal;
        gpus.push_back(std::move(g));
        first_use_ns.push_back(first_use(p, d));
      }
      GpuView& g = gpus[it->second];
      uint64_t& used = first_use_ns[it->second];
      used = std::min(used, first_use(p, d));
      if (g.name.empty()) g.name = d.name;
      if (!g.total_bytes) g.total_bytes = d.total_bytes;
      g.users.push_back({i, d.ordinal, d.peak_allocated, d.peak_reserved});
      g.sum_of_peak_allocated_bytes = saturating_add(g.sum_of_peak_allocated_bytes, d.peak_allocated.bytes);
      g.sum_of_peak_reserved_bytes = saturating_add(g.sum_of_peak_reserved_bytes, d.peak_reserved.bytes);
    }
  }
  std::vector<size_t> order(gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(gpus[a].host, first_use_ns[a], gpus[a].gpu, gpus[a].ordinal) <
           std::tie(gpus[b].host, first_use_ns[b], gpus[b].gpu, gpus[b].ordinal);
  });
  std::vector<GpuView> sorted;
  sorted.reserve(gpus.size());
  for (size_t i : order) sorted.push_back(std::move(gpus[i]));
  return sorted;
}

// The device entry of `user` in its process (the user's ordinal on the GPU's key).
const ProcessDevice* device_of(const std::vector<ProcessSummary>& processes, const GpuUser& user) {
  for (const ProcessDevice& d : processes[user.process].devices)
    if (d.ordinal == user.ordinal) return &d;
  return nullptr;
}

// One user's NVML samples as (time, what the process itself used), in time order, with its lifetime: what the
// other users' samples are matched against.
struct UserSamples {
  uint64_t start_unix_ns = 0, end_unix_ns = 0;
  std::vector<std::pair<uint64_t, uint64_t>> used;
};

UserSamples user_samples(const ProcessSummary& p, const ProcessDevice* device) {
  UserSamples u{p.start_unix_ns, p.end_unix_ns, {}};
  if (device)
    for (const DeviceSample& s : device->samples) u.used.emplace_back(s.unix_ns, s.process_used_bytes);
  std::sort(u.used.begin(), u.used.end());
  return u;
}

// What a user used on the device at `unix_ns` by its own sample nearest in time (the earlier one of two as
// near): 0 where it was not alive then, nullopt where it was but has no sample within kSampleMatchNs.
std::optional<uint64_t> used_at(const UserSamples& user, uint64_t unix_ns) {
  if (unix_ns < user.start_unix_ns || unix_ns > user.end_unix_ns) return 0;
  auto after = std::lower_bound(user.used.begin(), user.used.end(), std::make_pair(unix_ns, uint64_t(0)));
  std::optional<std::pair<uint64_t, uint64_t>> nearest;  // (distance, bytes)
  if (after != user.used.begin()) nearest = std::make_pair(unix_ns - std::prev(after)->first, std::prev(after)->second);
  if (after != user.used.end() && (!nearest || after->first - unix_ns < nearest->first))
    nearest = std::make_pair(after->first - unix_ns, after->second);
  if (!nearest || nearest->first > kSampleMatchNs) return std::nullopt;
  return nearest->second;
}

// The untraced processes' pids on `gpu`: those NVML listed beside its users that no traced process on the host has.
std::vector<uint32_t> untraced_pids(const std::vector<ProcessSummary>& processes, const GpuView& gpu) {
  std::set<uint32_t> traced;
  for (const ProcessSummary& p : processes)
    if (p.host == gpu.host) traced.insert(p.pid);
  std::set<uint32_t> pids;
  for (const GpuUser& user : gpu.users)
    if (const ProcessDevice* d = device_of(processes, user))
      for (uint32_t pid : d->nvml_other_pids)
        if (!traced.count(pid)) pids.insert(pid);
  return {pids.begin(), pids.end()};
}

std::optional<UntracedMemory> untraced_memory(const std::vector<ProcessSummary>& processes, const GpuView& gpu) {
  std::vector<UserSamples> samples;
  for (const GpuUser& user : gpu.users)
    samples.push_back(user_samples(processes[user.process], device_of(processes, user)));
  UntracedMemory most;
  for (size_t u = 0; u < gpu.users.size(); ++u) {
    const ProcessDevice* device = device_of(processes, gpu.users[u]);
    if (!device) continue;
    for (const DeviceSample& sample : device->samples) {
      uint64_t untraced = sample.other_processes_used_bytes;
      bool judged = true;
      for (size_t o = 0; o < gpu.users.size() && judged; ++o) {
        if (gpu.users[o].process == gpu.users[u].process) continue;
        std::optional<uint64_t> used = used_at(samples[o], sample.unix_ns);
        if (used) untraced = saturating_sub(untraced, *used);
        judged = used.has_value();
      }
      if (judged && untraced > most.bytes) most = {untraced, sample.unix_ns, gpu.users[u].process, {}};
    }
  }
  most.pids = untraced_pids(processes, gpu);
  if (!most.bytes && most.pids.empty()) return std::nullopt;
  return most;
}

// The device where the process peaked highest (ties: the lowest ordinal); nullptr for none.
const ProcessDevice* highest_peak(const ProcessSummary& p) {
  const ProcessDevice* best = nullptr;
  for (const ProcessDevice& d : p.devices)
    if (!best || d.peak_allocated.bytes > best->peak_allocated.bytes ||
        (d.peak_allocated.bytes == best->peak_allocated.bytes && d.ordinal < best->ordinal))
      best = &d;
  return best;
}

RankRow rank_row(const ProcessSummary& p, size_t index) {
  RankRow row;
  row.rank = *p.rank;
  row.process = index;
  if (const ProcessDevice* d = highest_peak(p)) {
    row.gpu = d->gpu;
    row.ordinal = d->ordinal;
    row.peak_allocated = d->peak_allocated;
    row.peak_reserved = d->peak_reserved;
  }
  for (const ProcessDevice& d : p.devices) row.ooms = saturating_add(row.ooms, d.ooms);
  row.leaked_bytes = p.leaked_bytes;
  return row;
}

// A process whose traced parent has its rank is that rank's child (a DataLoader worker inherits RANK), not a row.
bool rank_child(const std::vector<ProcessSummary>& processes, const std::vector<std::optional<size_t>>& parent,
                size_t i) {
  return parent[i] && processes[*parent[i]].rank == processes[i].rank;
}

RankTable rank_table(const std::vector<ProcessSummary>& processes, const std::vector<std::optional<size_t>>& parent) {
  RankTable table;
  for (size_t i = 0; i < processes.size(); ++i)
    if (processes[i].rank && !rank_child(processes, parent, i)) table.rows.push_back(rank_row(processes[i], i));
  if (table.rows.empty()) return table;
  std::stable_sort(table.rows.begin(), table.rows.end(),
                   [](const RankRow& a, const RankRow& b) { return a.rank < b.rank; });
  table.worst = 0;
  uint64_t min_allocated = UINT64_MAX, max_allocated = 0, min_reserved = UINT64_MAX, max_reserved = 0;
  std::vector<uint64_t> allocated;
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const RankRow& row = table.rows[i];
    if (row.peak_allocated.bytes > table.rows[*table.worst].peak_allocated.bytes) table.worst = i;
    min_allocated = std::min(min_allocated, row.peak_allocated.bytes);
    max_allocated = std::max(max_allocated, row.peak_allocated.bytes);
    min_reserved = std::min(min_reserved, row.peak_reserved.bytes);
    max_reserved = std::max(max_reserved, row.peak_reserved.bytes);
    allocated.push_back(row.peak_allocated.bytes);
  }
  table.peak_allocated_spread_bytes = max_allocated - min_allocated;
  table.peak_reserved_spread_bytes = max_reserved - min_reserved;
  std::sort(allocated.begin(), allocated.end());
  table.median_peak_allocated_bytes = allocated[(allocated.size() - 1) / 2];
  return table;
}

bool touched(const ProcessDevice& d) { return d.allocations || d.peak_allocated.bytes || d.peak_reserved.bytes; }

// The process's own device: the ordinal of its local rank where it used that ordinal, else where it peaked
// highest.
const ProcessDevice* local_device(const ProcessSummary& p) {
  if (p.local_rank)
    for (const ProcessDevice& d : p.devices)
      if (d.ordinal >= 0 && uint32_t(d.ordinal) == *p.local_rank) return &d;
  return highest_peak(p);
}

std::vector<WrongDevice> wrong_devices(const std::vector<ProcessSummary>& processes) {
  std::vector<WrongDevice> wrong;
  for (size_t i = 0; i < processes.size(); ++i) {
    const ProcessSummary& p = processes[i];
    if (!p.rank && !p.local_rank) continue;
    const ProcessDevice* local = local_device(p);
    if (!local) continue;
    std::vector<const ProcessDevice*> others;
    for (const ProcessDevice& d : p.devices)
      if (&d != local && touched(d)) others.push_back(&d);
    std::sort(others.begin(), others.end(),
              [](const ProcessDevice* a, const ProcessDevice* b) { return a->ordinal < b->ordinal; });
    for (const ProcessDevice* d : others)
      wrong.push_back({i, d->ordinal, d->gpu, local->ordinal, d->peak_allocated.bytes, d->first_allocation_unix_ns,
                       d->first_allocation_site});
  }
  return wrong;
}

std::vector<MergedLeak> merge_leaks(const std::vector<ProcessSummary>& processes) {
  std::vector<MergedLeak> merged;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < processes.size(); ++i) {
    for (const ProcessLeak& l : processes[i].leaks) {
      auto [it, added] = index.try_emplace(l.site_key, merged.size());
      if (added) merged.push_back({l.site_key, l.site, 0, 0, {}});
      MergedLeak& m = merged[it->second];
      if (m.site.empty()) m.site = l.site;
      m.bytes = saturating_add(m.bytes, l.bytes);
      m.count = saturating_add(m.count, l.count);
      if (m.processes.empty() || m.processes.back() != i) m.processes.push_back(i);
    }
  }
  std::sort(merged.begin(), merged.end(), [](const MergedLeak& a, const MergedLeak& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site_key < b.site_key;
  });
  return merged;
}

}  // namespace

namespace {

// Moves out the summaries of a process already seen (fleet.h, FleetView::duplicates), keeping the first of each.
std::vector<std::string> drop_duplicates(std::vector<ProcessSummary>& processes) {
  std::set<std::tuple<std::string, uint32_t, uint64_t>> seen;
  std::vector<std::string> duplicates;
  std::vector<ProcessSummary> kept;
  for (ProcessSummary& p : processes) {
    if (p.start_unix_ns != 0 && !seen.insert({p.host, p.pid, p.start_unix_ns}).second) {
      duplicates.push_back(p.trace);
      continue;
    }
    kept.push_back(std::move(p));
  }
  processes = std::move(kept);
  return duplicates;
}

}  // namespace

FleetView build_fleet(std::vector<ProcessSummary> processes) {
  FleetView view;
  view.duplicates = drop_duplicates(processes);
  sort_processes(processes);
  view.processes = std::move(processes);
  view.first_start_unix_ns = first_start(view.processes);
  for (size_t i = 0; i < view.processes.size(); ++i) view.parent.push_back(parent_of(view.processes, i));
  view.gpus = group_gpus(view.processes);
  for (GpuView& gpu : view.gpus) gpu.untraced = untraced_memory(view.processes, gpu);
  view.ranks = rank_table(view.processes, view.parent);
  view.wrong_devices = wrong_devices(view.processes);
  view.leaks = merge_leaks(view.processes);
  return view;
}

std::vector<std::string> add_combined_timelines(FleetView& view, size_t max_points) {
  std::vector<std::string> failures;
  for (GpuView& gpu : view.gpus) {
    if (gpu.users.size() < 2) continue;
    std::vector<CombinedMember> members;
    for (const GpuUser& user : gpu.users) members.push_back({view.processes[user.process].trace, user.ordinal});
    const std::string name = gpu.gpu.empty() ? gpu.host + "/cuda:" + std::to_string(gpu.ordinal) : gpu.gpu;
    try {
      gpu.combined = combine_timelines(members, max_points);
    } catch (const CombinedTraceError& e) {
      failures.push_back(name + ": no combined timeline: " + e.trace() + ": " + e.what());
    } catch (const std::exception& e) {  // the temporary file: the message says what failed
      failures.push_back(name + ": no combined timeline: " + e.what());
    }
  }
  return failures;
}

}  // namespace memtrace
