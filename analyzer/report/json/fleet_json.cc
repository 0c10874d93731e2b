#include "report/json/fleet_json.h"

namespace memtrace {
namespace {

using nlohmann::json;

json optional_json(const std::optional<size_t>& index) { return index ? json(*index) : json(nullptr); }

json processes_json(const FleetView& view) {
  json processes = json::array();
  for (size_t i = 0; i < view.processes.size(); ++i) {
    json entry = process_summary_json(view.processes[i]);
    entry["parent"] = i < view.parent.size() ? optional_json(view.parent[i]) : json(nullptr);
    processes.push_back(std::move(entry));
  }
  return processes;
}

// The members' shares are the GPU's users' (the caller combines the users, in their order).
json moment_json(const GpuView& gpu, const CombinedMoment& moment) {
  json shares = json::array();
  for (size_t i = 0; i < gpu.users.size(); ++i)
    shares.push_back(
        {{"process", gpu.users[i].process},
         {"allocated_bytes", i < moment.member_allocated_bytes.size() ? moment.member_allocated_bytes[i] : 0},
         {"reserved_bytes", i < moment.member_reserved_bytes.size() ? moment.member_reserved_bytes[i] : 0}});
  return {{"unix_ns", moment.unix_ns},
          {"allocated_bytes", moment.allocated_bytes},
          {"reserved_bytes", moment.reserved_bytes},
          {"processes", shares}};
}

json untraced_json(const std::optional<UntracedMemory>& untraced) {
  if (!untraced) return nullptr;
  return {{"bytes", untraced->bytes},
          {"unix_ns", untraced->unix_ns},
          {"seen_by", untraced->seen_by},
          {"pids", untraced->pids}};
}

json gpu_json(const GpuView& gpu) {
  json users = json::array();
  for (const GpuUser& user : gpu.users)
    users.push_back({{"process", user.process},
                     {"ordinal", user.ordinal},
                     {"peak_allocated", timed_bytes_json(user.peak_allocated)},
                     {"peak_reserved", timed_bytes_json(user.peak_reserved)}});
  json combined = nullptr;
  if (gpu.combined)
    combined = {{"peak_allocated", moment_json(gpu, gpu.combined->peak_allocated)},
                {"peak_reserved", moment_json(gpu, gpu.combined->peak_reserved)}};
  return {{"gpu", gpu.gpu.empty() ? json(nullptr) : json(gpu.gpu)},
          {"host", gpu.host},
          {"ordinal", gpu.ordinal},
          {"name", gpu.name},
          {"total_bytes", gpu.total_bytes},
          {"processes", users},
          {"sum_of_peak_allocated_bytes", gpu.sum_of_peak_allocated_bytes},
          {"sum_of_peak_reserved_bytes", gpu.sum_of_peak_reserved_bytes},
          {"untraced", untraced_json(gpu.untraced)},
          {"combined", combined}};
}

json ranks_json(const RankTable& table) {
  json rows = json::array();
  for (const RankRow& row : table.rows)
    rows.push_back({{"rank", row.rank},
                    {"process", row.process},
                    {"gpu", row.gpu.empty() ? json(nullptr) : json(row.gpu)},
                    {"ordinal", row.ordinal},
                    {"peak_allocated", timed_bytes_json(row.peak_allocated)},
                    {"peak_reserved", timed_bytes_json(row.peak_reserved)},
                    {"leaked_bytes", row.leaked_bytes},
                    {"ooms", row.ooms}});
  return {{"rows", rows},
          {"worst_rank", table.worst ? json(table.rows[*table.worst].rank) : json(nullptr)},
          {"worst_process", table.worst ? json(table.rows[*table.worst].process) : json(nullptr)},
          {"peak_allocated_spread_bytes", table.peak_allocated_spread_bytes},
          {"peak_reserved_spread_bytes", table.peak_reserved_spread_bytes},
          {"median_peak_allocated_bytes", table.median_peak_allocated_bytes}};
}

json wrong_devices_json(const FleetView& view) {
  json wrong = json::array();
  for (const WrongDevice& w : view.wrong_devices)
    wrong.push_back({{"process", w.process},
                     {"pid", view.processes[w.process].pid},
                     {"ordinal", w.ordinal},
                     {"gpu", w.gpu.empty() ? json(nullptr) : json(w.gpu)},
                     {"local_ordinal", w.local_ordinal},
                     {"peak_allocated_bytes", w.peak_allocated_bytes},
                     {"first_allocation_unix_ns", w.first_allocation_unix_ns},
                     {"first_allocation_site", w.first_allocation_site}});
  return wrong;
}

json merged_leaks_json(const FleetView& view) {
  json leaks = json::array();
  for (const MergedLeak& l : view.leaks)
    leaks.push_back({{"site_key", l.site_key},
                     {"site", l.site},
                     {"bytes", l.bytes},
                     {"count", l.count},
                     {"processes", l.processes}});
  return leaks;
}

}  // namespace

json timed_bytes_json(const TimedBytes& value) { return {{"bytes", value.bytes}, {"unix_ns", value.unix_ns}}; }

json fleet_json(const FleetView& view) {
  json gpus = json::array();
  for (const GpuView& gpu : view.gpus) gpus.push_back(gpu_json(gpu));
  return {{"first_start_unix_ns", view.first_start_unix_ns},
          {"processes", processes_json(view)},
          {"gpus", gpus},
          {"ranks", ranks_json(view.ranks)},
          {"wrong_devices", wrong_devices_json(view)},
          {"leaks", merged_leaks_json(view)},
          {"duplicates", view.duplicates}};
}

}  // namespace memtrace
