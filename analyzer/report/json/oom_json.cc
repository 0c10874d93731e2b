#include "report/json/oom_json.h"

#include "analysis/oom_diagnosis.h"
#include "report/json/report_json.h"

namespace memtrace {
namespace {

using nlohmann::json;

// The DEVICE_USAGE sample as `summary` shows it, and whether the hook took it right after this failure.
json usage_json(const OomDetail& d) {
  json usage = device_usage_json(d.usage);
  if (d.usage) usage["after_oom"] = d.usage_after_oom;
  return usage;
}

json detail_json(size_t number, const OomDetail& d, FrameResolver& resolver) {
  const OomEvent& o = d.oom;
  json live = json::array();
  for (const CallSite& s : d.top_live_sites)
    live.push_back(with_site_stack({{"bytes", s.bytes}, {"count", s.count}}, s, resolver));
  json growing = json::array();
  for (const LeakSite& l : d.growing_sites)
    growing.push_back(with_site_stack({{"bytes", l.site.bytes},
                                       {"count", l.growth_count},
                                       {"growth_bytes_per_step", l.growth_bytes_per_step},
                                       {"median_interval_s", l.median_interval_s}},
                                      l.site, resolver));
  json diagnoses = json::array();
  for (const OomDiagnosis& diagnosis : diagnose_oom(d))
    diagnoses.push_back({{"cause", oom_cause_name(diagnosis.cause)}, {"text", diagnosis.text}});
  json detail = {{"number", number},
                 {"time_s", seconds(o.time_ns)},
                 {"device", o.device},
                 {"api", proto::Api_Name(o.api)},
                 {"layer", proto::Layer_Name(o.layer)},
                 {"result", o.result},
                 {"tid", o.tid},
                 {"driver_attempts", o.driver_attempts},
                 {"requested_bytes", o.requested_bytes},
                 {"device_free_bytes", o.device_free_bytes},
                 {"device_total_bytes", o.device_total_bytes},
                 {"allocated_bytes", d.totals.allocated_bytes},
                 {"reserved_bytes", d.totals.reserved_bytes},
                 {"driver_bytes", d.totals.driver_bytes},
                 {"allocator_layer", d.allocator_layer},
                 {"device_usage", usage_json(d)},
                 {"fragmentation", fragmentation_json(d.fragmentation)},
                 {"live_call_site_count", d.live_site_count},
                 {"live_call_sites", live},
                 {"growing_call_site_count", d.growing_site_count},
                 {"growing_call_sites", growing},
                 {"diagnoses", diagnoses}};
  if (!d.call_sites_listed) {
    for (const char* key : {"live_call_site_count", "live_call_sites", "growing_call_site_count", "growing_call_sites"})
      detail[key] = nullptr;
    detail["call_sites_not_listed_reason"] = kSitesNotListedReason;
  }
  return with_stack(std::move(detail), resolver.resolve(o.stack_id));
}

}  // namespace

json oom_report_json(const Analysis& analysis, const OomReport& report, FrameResolver& resolver) {
  json ooms = json::array();
  for (size_t i = 0; i < report.detailed.size(); ++i) ooms.push_back(detail_json(i + 1, report.detailed[i], resolver));
  return {{"trace", trace_json(analysis)},
          {"oom_count", report.total},
          {"detailed_count", report.detailed.size()},
          {"ooms", ooms}};
}

}  // namespace memtrace
