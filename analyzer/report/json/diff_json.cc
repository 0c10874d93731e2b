#include "report/json/diff_json.h"

#include "report/json/report_json.h"

namespace memtrace {

using nlohmann::json;

namespace {

json optional_json(const std::optional<int64_t>& value) { return value ? json(*value) : json(nullptr); }
json optional_json(const std::optional<uint64_t>& value) { return value ? json(*value) : json(nullptr); }

json growth_measure_json(GrowthMeasure measure) {
  switch (measure) {
    case GrowthMeasure::kPerIteration: return "per_iteration";
    case GrowthMeasure::kPerStep: return "per_step";
    case GrowthMeasure::kNone: break;
  }
  return nullptr;
}

// "new" (only in AFTER), "gone" (only in BEFORE), else `both`.
const char* status(bool before, bool after, const char* both) { return !before ? "new" : !after ? "gone" : both; }

json device_side_json(const std::optional<DeviceFigures>& d) {
  if (!d) return nullptr;
  return {{"peak_allocated_bytes", d->peak_allocated_bytes},
          {"peak_allocated_time_s", seconds(d->peak_allocated_time_ns)},
          {"growth_per_iteration_bytes", optional_json(d->growth_per_iteration_bytes)},
          {"name", d->name},
          {"total_bytes", d->total_bytes}};
}

json device_json(const DeviceChange& d) {
  json categories = json::array();
  for (const CategoryChange& c : d.categories)
    categories.push_back({{"name", c.name},
                          {"before_bytes", optional_json(c.before_bytes)},
                          {"after_bytes", optional_json(c.after_bytes)},
                          {"change_bytes", optional_json(c.change_bytes)}});
  return {{"device", d.device},
          {"status", status(d.before.has_value(), d.after.has_value(), "both")},
          {"other_gpu", d.other_gpu},
          {"before", device_side_json(d.before)},
          {"after", device_side_json(d.after)},
          {"peak_allocated_change_bytes", d.peak_allocated_change_bytes},
          {"growth_per_iteration_change_bytes", optional_json(d.growth_per_iteration_change_bytes)},
          {"categories", categories}};
}

json site_side_json(const std::optional<SiteSide>& side) {
  if (!side) return nullptr;
  return {{"peak_bytes", side->peak_bytes},
          {"peak_count", side->peak_count},
          {"growth_bytes", optional_json(side->growth_bytes)}};
}

json site_json(const SiteChange& c, FrameResolver& before_frames, FrameResolver& after_frames) {
  json fields = {{"device", c.device},
                 {"status", status(c.before.has_value(), c.after.has_value(), c.changed() ? "changed" : "unchanged")},
                 {"before", site_side_json(c.before)},
                 {"after", site_side_json(c.after)},
                 {"peak_change_bytes", c.peak_change_bytes},
                 {"growth_change_bytes", optional_json(c.growth_change_bytes)}};
  return with_site_stack(std::move(fields), c.shown_site(), c.shown_in_after() ? after_frames : before_frames);
}

json program_json(const std::string& program) { return program.empty() ? json(nullptr) : json(program); }

}  // namespace

json diff_json(const Analysis& before, FrameResolver& before_frames, const Symbolizer& before_symbolizer,
               const Analysis& after, FrameResolver& after_frames, const Symbolizer& after_symbolizer,
               const DiffResult& diff) {
  json devices = json::array(), sites = json::array();
  for (const DeviceChange& d : diff.devices) devices.push_back(device_json(d));
  for (const SiteChange& c : diff.sites) sites.push_back(site_json(c, before_frames, after_frames));
  json notes = json::array();
  for (const DiffNote& note : diff_notes(diff)) notes.push_back({{"kind", note.kind}, {"text", note.text}});
  json report = {
      {"before", trace_json(before)},
      {"after", trace_json(after)},
      {"program",
       {{"before", program_json(diff.program_before)},
        {"after", program_json(diff.program_after)},
        {"same", diff.same_program}}},
      {"same_devices", diff.same_devices},
      {"notes", notes},
      {"iterations", {{"before", diff.iterations_before}, {"after", diff.iterations_after}}},
      {"growth_measure", growth_measure_json(diff.growth)},
      {"devices", devices},
      {"site_count", diff.sites.size()},
      {"changed_site_count", diff.changed_sites},
      {"matched_site_count", diff.matched_sites},
      {"sites", sites},
  };
  // Once the frames are resolved: what each symbolizer could not open.
  add_symbolizer_health(report["before"], before_symbolizer);
  add_symbolizer_health(report["after"], after_symbolizer);
  return report;
}

}  // namespace memtrace
