#include "report/html/fleet_report_data.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/checked_math.h"

namespace memtrace {
namespace {

using nlohmann::json;

constexpr int64_t kMaxExactInteger = (int64_t(1) << 53) - 1;  // JavaScript's Number.MAX_SAFE_INTEGER

int64_t exact(uint64_t value) { return value > uint64_t(kMaxExactInteger) ? kMaxExactInteger : int64_t(value); }
int64_t exact(int64_t value) { return std::clamp(value, -kMaxExactInteger, kMaxExactInteger); }
int64_t exact(int32_t value) { return value; }
int64_t exact(uint32_t value) { return value; }

// Wall-clock times as ns since the origin: CLOCK_REALTIME ns (about 1.8e18) are past JavaScript's exact integers,
// their differences are not. 0 is "no time" (a trace without a start record) and becomes null.
struct Clock {
  uint64_t origin_unix_ns = 0;
  json at(uint64_t unix_ns) const {
    if (unix_ns == 0) return nullptr;
    if (unix_ns >= origin_unix_ns) return exact(unix_ns - origin_unix_ns);
    return -exact(origin_unix_ns - unix_ns);
  }
};

// An index into a list of `size`, or null where it points outside (never followed by the page).
json index_json(size_t index, size_t size) { return index < size ? json(exact(uint64_t(index))) : json(nullptr); }

json optional_json(const std::optional<uint32_t>& value) { return value ? json(*value) : json(nullptr); }

json timed_json(const TimedBytes& t, const Clock& clock) {
  return {{"bytes", exact(t.bytes)}, {"time_ns", clock.at(t.unix_ns)}};
}

std::string command_of(const ProcessSummary& p) {
  std::string command;
  for (const std::string& arg : p.argv) command += (command.empty() ? "" : " ") + arg;
  return command;
}

// The GPU (index into fleet.gpus) of each (process, ordinal) the view's users name.
using GpuOfDevice = std::map<std::pair<size_t, int32_t>, size_t>;
GpuOfDevice gpu_of_device(const FleetView& fleet) {
  GpuOfDevice out;
  for (size_t g = 0; g < fleet.gpus.size(); ++g)
    for (const GpuUser& u : fleet.gpus[g].users) out.emplace(std::pair{u.process, u.ordinal}, g);
  return out;
}

json process_device_json(const ProcessDevice& d, size_t process, const GpuOfDevice& gpus, const Clock& clock) {
  const auto gpu = gpus.find({process, d.ordinal});
  return {{"ordinal", d.ordinal},
          {"gpu", d.gpu},
          {"name", d.name},
          {"gpu_index", gpu == gpus.end() ? json(nullptr) : json(exact(uint64_t(gpu->second)))},
          {"total_bytes", exact(d.total_bytes)},
          {"peak_allocated", timed_json(d.peak_allocated, clock)},
          {"peak_reserved", timed_json(d.peak_reserved, clock)},
          {"final_allocated_bytes", exact(d.final_allocated_bytes)},
          {"final_reserved_bytes", exact(d.final_reserved_bytes)},
          {"allocations", exact(d.allocations)},
          {"ooms", exact(d.ooms)},
          {"first_allocation_ns", clock.at(d.first_allocation_unix_ns)},
          {"first_allocation_site", d.first_allocation_site}};
}

json process_json(const FleetView& fleet, size_t i, const GpuOfDevice& gpus, const Clock& clock) {
  const ProcessSummary& p = fleet.processes[i];
  json devices = json::array();
  uint64_t ooms = 0, leaked_bytes = 0, leaks = 0;
  for (const ProcessDevice& d : p.devices) {
    devices.push_back(process_device_json(d, i, gpus, clock));
    ooms = saturating_add(ooms, d.ooms);
  }
  for (const ProcessLeak& l : p.leaks) {
    leaked_bytes = saturating_add(leaked_bytes, l.bytes);
    leaks = saturating_add(leaks, l.count);
  }
  const std::optional<size_t> parent = i < fleet.parent.size() ? fleet.parent[i] : std::nullopt;
  return {{"trace", p.trace},
          {"pid", p.pid},
          {"ppid", p.ppid},
          {"parent", parent ? index_json(*parent, fleet.processes.size()) : json(nullptr)},
          {"host", p.host},
          {"rank", optional_json(p.rank)},
          {"local_rank", optional_json(p.local_rank)},
          {"world_size", optional_json(p.world_size)},
          {"job_id", p.job_id},
          {"command", command_of(p)},
          {"start_ns", clock.at(p.start_unix_ns)},
          {"end_ns", clock.at(p.end_unix_ns)},
          {"truncated", p.truncated},
          {"devices", std::move(devices)},
          {"leaked_bytes", exact(leaked_bytes)},
          {"leaked_allocations", exact(leaks)},
          {"ooms", exact(ooms)}};
}

// The processes in tree order: each root (no traced parent, or a parent outside the view), then its children
// under it, depth first, children by index. A parent cycle (only a hand-made view has one) is entered at its
// lowest index, so that every process is listed exactly once.
json tree_json(const FleetView& fleet) {
  const size_t n = fleet.processes.size();
  std::vector<std::vector<size_t>> children(n);
  std::vector<bool> is_root(n, true);
  for (size_t i = 0; i < n && i < fleet.parent.size(); ++i) {
    const std::optional<size_t>& parent = fleet.parent[i];
    if (parent && *parent < n && *parent != i) {
      children[*parent].push_back(i);
      is_root[i] = false;
    }
  }
  json tree = json::array();
  std::vector<bool> listed(n, false);
  auto visit = [&](size_t root) {
    std::vector<std::pair<size_t, uint64_t>> stack = {{root, 0}};  // (process, depth), last out first
    while (!stack.empty()) {
      const auto [i, depth] = stack.back();
      stack.pop_back();
      if (listed[i]) continue;
      listed[i] = true;
      tree.push_back({{"process", exact(uint64_t(i))}, {"depth", exact(depth)}});
      for (auto c = children[i].rbegin(); c != children[i].rend(); ++c) stack.emplace_back(*c, depth + 1);
    }
  };
  for (size_t i = 0; i < n; ++i)
    if (is_root[i]) visit(i);
  for (size_t i = 0; i < n; ++i)
    if (!listed[i]) visit(i);
  return tree;
}

json bytes_list(const std::vector<uint64_t>& values) {
  json out = json::array();
  for (uint64_t v : values) out.push_back(exact(v));
  return out;
}

json moment_json(const CombinedMoment& m, const Clock& clock) {
  return {{"time_ns", clock.at(m.unix_ns)},
          {"allocated_bytes", exact(m.allocated_bytes)},
          {"reserved_bytes", exact(m.reserved_bytes)},
          {"member_allocated_bytes", bytes_list(m.member_allocated_bytes)},
          {"member_reserved_bytes", bytes_list(m.member_reserved_bytes)}};
}

// One list per member of its bytes at every point, null at a point without members' shares (a thinned point);
// no lists at all where no point has shares.
json member_columns(const std::vector<CombinedMoment>& points, size_t members, bool reserved) {
  const bool any = std::any_of(points.begin(), points.end(), [](const CombinedMoment& p) {
    return !p.member_allocated_bytes.empty() || !p.member_reserved_bytes.empty();
  });
  json out = json::array();
  if (!any) return out;
  for (size_t m = 0; m < members; ++m) {
    json column = json::array();
    for (const CombinedMoment& p : points) {
      const std::vector<uint64_t>& shares = reserved ? p.member_reserved_bytes : p.member_allocated_bytes;
      column.push_back(m < shares.size() ? json(exact(shares[m])) : json(nullptr));
    }
    out.push_back(std::move(column));
  }
  return out;
}

json combined_json(const GpuView& g, const CombinedTimeline& c, size_t processes, const Clock& clock) {
  json members = json::array();
  for (const GpuUser& u : g.users) members.push_back(index_json(u.process, processes));
  json t = json::array(), allocated = json::array(), reserved = json::array();
  for (const CombinedMoment& p : c.points) {
    t.push_back(clock.at(p.unix_ns));
    allocated.push_back(exact(p.allocated_bytes));
    reserved.push_back(exact(p.reserved_bytes));
  }
  return {{"members", std::move(members)},
          {"changes", exact(c.changes)},
          {"peak_allocated", moment_json(c.peak_allocated, clock)},
          {"peak_reserved", moment_json(c.peak_reserved, clock)},
          {"points",
           {{"t_ns", std::move(t)},
            {"allocated_bytes", std::move(allocated)},
            {"reserved_bytes", std::move(reserved)},
            {"member_allocated_bytes", member_columns(c.points, g.users.size(), false)},
            {"member_reserved_bytes", member_columns(c.points, g.users.size(), true)}}}};
}

json gpu_json(const GpuView& g, size_t processes, const Clock& clock) {
  json users = json::array();
  for (const GpuUser& u : g.users)
    users.push_back({{"process", index_json(u.process, processes)},
                     {"ordinal", u.ordinal},
                     {"peak_allocated", timed_json(u.peak_allocated, clock)},
                     {"peak_reserved", timed_json(u.peak_reserved, clock)}});
  json untraced = nullptr;
  if (g.untraced) {
    json pids = json::array();
    for (uint32_t pid : g.untraced->pids) pids.push_back(pid);
    untraced = {{"bytes", exact(g.untraced->bytes)},
                {"time_ns", clock.at(g.untraced->unix_ns)},
                {"seen_by", index_json(g.untraced->seen_by, processes)},
                {"pids", std::move(pids)}};
  }
  return {{"gpu", g.gpu},
          {"host", g.host},
          {"ordinal", g.ordinal},
          {"name", g.name},
          {"total_bytes", exact(g.total_bytes)},
          {"users", std::move(users)},
          {"sum_of_peak_allocated_bytes", exact(g.sum_of_peak_allocated_bytes)},
          {"sum_of_peak_reserved_bytes", exact(g.sum_of_peak_reserved_bytes)},
          {"untraced", std::move(untraced)},
          {"combined", g.combined ? combined_json(g, *g.combined, processes, clock) : json(nullptr)}};
}

json ranks_json(const RankTable& ranks, size_t processes, const Clock& clock) {
  json rows = json::array();
  for (const RankRow& r : ranks.rows)
    rows.push_back({{"rank", r.rank},
                    {"process", index_json(r.process, processes)},
                    {"gpu", r.gpu},
                    {"ordinal", r.ordinal},
                    {"peak_allocated", timed_json(r.peak_allocated, clock)},
                    {"peak_reserved", timed_json(r.peak_reserved, clock)},
                    {"leaked_bytes", exact(r.leaked_bytes)},
                    {"ooms", exact(r.ooms)}});
  return {{"rows", std::move(rows)},
          {"worst", ranks.worst ? index_json(*ranks.worst, ranks.rows.size()) : json(nullptr)},
          {"peak_allocated_spread_bytes", exact(ranks.peak_allocated_spread_bytes)},
          {"peak_reserved_spread_bytes", exact(ranks.peak_reserved_spread_bytes)},
          {"median_peak_allocated_bytes", exact(ranks.median_peak_allocated_bytes)}};
}

json wrong_devices_json(const std::vector<WrongDevice>& wrong, size_t processes, const Clock& clock) {
  json out = json::array();
  for (const WrongDevice& w : wrong)
    out.push_back({{"process", index_json(w.process, processes)},
                   {"ordinal", w.ordinal},
                   {"gpu", w.gpu},
                   {"local_ordinal", w.local_ordinal},
                   {"peak_allocated_bytes", exact(w.peak_allocated_bytes)},
                   {"first_allocation_ns", clock.at(w.first_allocation_unix_ns)},
                   {"first_allocation_site", w.first_allocation_site}});
  return out;
}

json leaks_json(const std::vector<MergedLeak>& leaks, size_t processes) {
  json out = json::array();
  for (const MergedLeak& l : leaks) {
    json members = json::array();
    for (size_t p : l.processes) members.push_back(index_json(p, processes));
    out.push_back({{"site_key", l.site_key},
                   {"site", l.site},
                   {"bytes", exact(l.bytes)},
                   {"count", exact(l.count)},
                   {"processes", std::move(members)}});
  }
  return out;
}

// The figures of the summary cards: counts, the worst rank, and the largest combined peak allocated over the
// GPUs that have a combined timeline (the first GPU of the largest).
json summary_json(const FleetView& fleet, const Clock& clock) {
  json worst = nullptr;
  if (fleet.ranks.worst && *fleet.ranks.worst < fleet.ranks.rows.size()) {
    const RankRow& r = fleet.ranks.rows[*fleet.ranks.worst];
    worst = {{"rank", r.rank},
             {"process", index_json(r.process, fleet.processes.size())},
             {"peak_allocated", timed_json(r.peak_allocated, clock)}};
  }
  json largest = nullptr;
  const CombinedMoment* best = nullptr;
  for (size_t g = 0; g < fleet.gpus.size(); ++g) {
    const std::optional<CombinedTimeline>& c = fleet.gpus[g].combined;
    if (!c || (best && c->peak_allocated.allocated_bytes <= best->allocated_bytes)) continue;
    best = &c->peak_allocated;
    largest = {{"gpu", exact(uint64_t(g))},
               {"allocated_bytes", exact(best->allocated_bytes)},
               {"time_ns", clock.at(best->unix_ns)}};
  }
  std::vector<std::string> hosts;
  for (const ProcessSummary& p : fleet.processes) hosts.push_back(p.host);
  std::sort(hosts.begin(), hosts.end());
  const size_t distinct_hosts = size_t(std::unique(hosts.begin(), hosts.end()) - hosts.begin());
  return {{"processes", exact(uint64_t(fleet.processes.size()))},
          {"hosts", exact(uint64_t(distinct_hosts))},
          {"gpus", exact(uint64_t(fleet.gpus.size()))},
          {"ranks", exact(uint64_t(fleet.ranks.rows.size()))},
          {"worst_rank", std::move(worst)},
          {"largest_combined_peak", std::move(largest)},
          {"wrong_devices", exact(uint64_t(fleet.wrong_devices.size()))},
          {"leak_sites", exact(uint64_t(fleet.leaks.size()))}};
}

}  // namespace

json fleet_report_data(const FleetView& fleet) {
  const Clock clock{fleet.first_start_unix_ns};  // the text reports' time zero too
  const size_t n = fleet.processes.size();
  const GpuOfDevice gpus = gpu_of_device(fleet);
  json processes = json::array();
  for (size_t i = 0; i < n; ++i) processes.push_back(process_json(fleet, i, gpus, clock));
  json gpu_list = json::array();
  for (const GpuView& g : fleet.gpus) gpu_list.push_back(gpu_json(g, n, clock));
  return {{"format", 1},
          {"kind", "fleet"},
          {"origin_unix_ns", std::to_string(clock.origin_unix_ns)},
          {"summary", summary_json(fleet, clock)},
          {"processes", std::move(processes)},
          {"tree", tree_json(fleet)},
          {"gpus", std::move(gpu_list)},
          {"ranks", ranks_json(fleet.ranks, n, clock)},
          {"wrong_devices", wrong_devices_json(fleet.wrong_devices, n, clock)},
          {"leaks", leaks_json(fleet.leaks, n)}};
}

}  // namespace memtrace
