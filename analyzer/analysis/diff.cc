#include "analysis/diff.h"

#include <algorithm>
#include <limits>

#include "util/checked_math.h"
#include "util/format.h"

namespace memtrace {
namespace {

std::string file_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// TraceFigures::program. File names only: the same script run from another directory is the same program.
std::string program_of(const TraceInfo& info) {
  if (!info.start || info.start->argv().empty()) return "";
  const auto& argv = info.start->argv();
  const std::string program = file_name(argv[0]);
  if (program.rfind("python", 0) != 0) return program;
  for (int i = 1, n = argv.size(); i < n; ++i) {
    const std::string& arg = argv[i];
    if (arg == "-m" && i + 1 < n) return program + " -m " + argv[i + 1];
    if (arg == "-c") return program + " -c";
    if (arg.empty() || arg[0] != '-') return program + ' ' + file_name(arg);
    if (arg == "-W" || arg == "-X") ++i;  // the interpreter's options that take a value of their own
  }
  return program;
}

// The key of a site, or the empty key for a stack the trace does not define (stack id 0 among them): every
// allocation without a stack on a device is one "(no stack)" site, which matches its like in the other trace.
PortableSiteKey key_of(const StackTable& stacks, uint64_t stack_id) {
  return site_key(stacks, stack_id).value_or(PortableSiteKey{});
}

// (device, key) of sites of ONE table, in constant time per frame (SameTableLess).
struct SameTableSiteLess {
  bool operator()(const std::pair<int32_t, PortableSiteKey>& a, const std::pair<int32_t, PortableSiteKey>& b) const {
    if (a.first != b.first) return a.first < b.first;
    return SameTableLess{}(a.second, b.second);
  }
};

void add_devices(const Analysis& analysis, TraceFigures& figures) {
  for (const auto& [device, state] : analysis.model.devices()) {
    DeviceFigures& d = figures.devices[device];
    d.peak_allocated_bytes = state.peak_allocated().bytes;
    d.peak_allocated_time_ns = state.peak_allocated().time_ns;
    if (device < 0) continue;
    if (const proto::Device* record = analysis.info.device(uint32_t(device))) {
      d.name = record->name();
      d.total_bytes = record->total_bytes();
    }
  }
}

}  // namespace

TraceFigures gather_trace_figures(const Analysis& analysis, const IterationReport& iterations,
                                  const std::map<int32_t, MomentBreakdown>& breakdowns) {
  TraceFigures figures;
  figures.program = program_of(analysis.info);
  if (analysis.read.truncated)
    figures.truncated =
        TruncatedRead{analysis.read.complete_bytes, analysis.read.file_bytes, analysis.last_event_time_ns};
  add_devices(analysis, figures);
  std::map<std::pair<int32_t, PortableSiteKey>, size_t, SameTableSiteLess> index;  // -> figures.sites
  auto site_of = [&](const CallSite& site) -> SiteFigures& {
    auto [at, added] = index.try_emplace({site.device, key_of(analysis.stacks, site.stack_id)}, figures.sites.size());
    if (added) {
      SiteFigures s;
      s.key = at->first.second;
      s.device = site.device;
      s.stack_id = site.stack_id;
      s.stack_count = site.stack_count;
      figures.sites.push_back(std::move(s));
    }
    return figures.sites[at->second];
  };
  for (const auto& [device, sites] : analysis.live_at_peak) {
    for (const CallSite& site : sites) {
      SiteFigures& s = site_of(site);
      s.peak_bytes = saturating_add(s.peak_bytes, site.bytes);
      s.peak_count = saturating_add(s.peak_count, site.count);
    }
  }
  // The leak analysis decides for every site whether it grows: one it does not name grew by nothing.
  figures.growth_per_step_measured = true;
  for (const LeakSite& leak : analysis.leaks)
    if (leak.growing) site_of(leak.site).growth_per_step_bytes = leak.growth_bytes_per_step;
  if (iterations.found()) {
    figures.iterations = iterations.phases.iterations.size();
    figures.growth_per_iteration_measured = true;
    const int32_t device = iterations.figures.device;
    if (auto d = figures.devices.find(device); d != figures.devices.end())
      d->second.growth_per_iteration_bytes = iterations.figures.allocated_growth_per_iteration_bytes;
    for (const LeakGroup& group : iterations.groups) {
      for (const GrowingSite& growing : group.sites) {
        CallSite site;
        site.device = device;
        site.stack_id = growing.stack_id;
        SiteFigures& s = site_of(site);
        s.growth_per_iteration_bytes = saturating_add(s.growth_per_iteration_bytes.value_or(0),
                                                      int64_t(std::min<uint64_t>(growing.growth_per_iteration_bytes,
                                                                                 std::numeric_limits<int64_t>::max())));
      }
    }
  }
  for (const auto& [device, breakdown] : breakdowns) {
    auto d = figures.devices.find(device);
    if (d == figures.devices.end() || breakdown.phases_source == IterationSource::kNone) continue;
    for (size_t row = 0; row < kBreakdownRows; ++row)
      d->second.category_bytes.emplace_back(breakdown_row_name(BreakdownRow(row)), breakdown.rows[row].bytes);
  }
  return figures;
}

CallSite SiteChange::shown_site() const {
  const SiteSide& shown = after ? *after : *before;
  CallSite site;
  site.device = device;
  site.stack_id = shown.stack_id;
  site.bytes = shown.peak_bytes;
  site.count = shown.peak_count;
  site.stack_count = shown.stack_count;
  return site;
}

const char* growth_measure_name(GrowthMeasure measure) {
  switch (measure) {
    case GrowthMeasure::kPerIteration: return "per iteration";
    case GrowthMeasure::kPerStep: return "per step";
    case GrowthMeasure::kNone: break;
  }
  return "none";
}

namespace {

// after - before, saturated to int64_t's range (a damaged trace's sums can exceed it).
int64_t signed_change(uint64_t before, uint64_t after) {
  constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  if (after >= before) return int64_t(std::min(after - before, kMax));
  return -int64_t(std::min(before - after, kMax));
}

int64_t signed_change(int64_t before, int64_t after) {
  int64_t change = 0;
  if (__builtin_sub_overflow(after, before, &change))
    return after > before ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return change;
}

uint64_t magnitude(int64_t value) { return value < 0 ? 0 - uint64_t(value) : uint64_t(value); }

GrowthMeasure common_measure(const TraceFigures& before, const TraceFigures& after) {
  if (before.growth_per_iteration_measured && after.growth_per_iteration_measured) return GrowthMeasure::kPerIteration;
  if (before.growth_per_step_measured && after.growth_per_step_measured) return GrowthMeasure::kPerStep;
  return GrowthMeasure::kNone;
}

std::optional<int64_t> growth_of(const SiteFigures& site, GrowthMeasure measure) {
  switch (measure) {
    case GrowthMeasure::kPerIteration: return site.growth_per_iteration_bytes.value_or(0);
    case GrowthMeasure::kPerStep:
      return int64_t(std::min<uint64_t>(site.growth_per_step_bytes.value_or(0), std::numeric_limits<int64_t>::max()));
    case GrowthMeasure::kNone: break;
  }
  return std::nullopt;
}

// Adds `site` to `side`: a repeat of (device, key) adds its bytes, and the larger one's stack is shown.
void add_to_side(std::optional<SiteSide>& side, const SiteFigures& site, GrowthMeasure measure) {
  const std::optional<int64_t> growth = growth_of(site, measure);
  if (!side) {
    side = SiteSide{site.stack_id, site.stack_count, site.peak_bytes, site.peak_count, growth};
    return;
  }
  if (site.peak_bytes > side->peak_bytes) side->stack_id = site.stack_id, side->stack_count = site.stack_count;
  side->peak_bytes = saturating_add(side->peak_bytes, site.peak_bytes);
  side->peak_count = saturating_add(side->peak_count, site.peak_count);
  if (growth) side->growth_bytes = saturating_add(side->growth_bytes.value_or(0), *growth);
}

// (device, key) of sites of two tables: keys compare by content.
struct SiteLess {
  bool operator()(const std::pair<int32_t, const PortableSiteKey*>& a,
                  const std::pair<int32_t, const PortableSiteKey*>& b) const {
    if (a.first != b.first) return a.first < b.first;
    return *a.second < *b.second;
  }
};

void finish_site(SiteChange& c, GrowthMeasure measure) {
  const uint64_t before_bytes = c.before ? c.before->peak_bytes : 0, after_bytes = c.after ? c.after->peak_bytes : 0;
  c.peak_change_bytes = signed_change(before_bytes, after_bytes);
  if (measure == GrowthMeasure::kNone) return;
  const int64_t before_growth = c.before ? c.before->growth_bytes.value_or(0) : 0;
  const int64_t after_growth = c.after ? c.after->growth_bytes.value_or(0) : 0;
  c.growth_change_bytes = signed_change(before_growth, after_growth);
}

// Changed sites first, by |peak change| then |growth change| (largest first); ties and unchanged sites keep
// their (device, key) order.
void sort_moved_most_first(std::vector<SiteChange>& sites) {
  std::stable_sort(sites.begin(), sites.end(), [](const SiteChange& a, const SiteChange& b) {
    if (a.changed() != b.changed()) return a.changed();
    if (!a.changed()) return false;
    const uint64_t peak_a = magnitude(a.peak_change_bytes), peak_b = magnitude(b.peak_change_bytes);
    if (peak_a != peak_b) return peak_a > peak_b;
    return magnitude(a.growth_change_bytes.value_or(0)) > magnitude(b.growth_change_bytes.value_or(0));
  });
}

std::vector<SiteChange> diff_sites(const TraceFigures& before, const TraceFigures& after, GrowthMeasure measure,
                                   size_t* matched) {
  std::map<std::pair<int32_t, const PortableSiteKey*>, SiteChange, SiteLess> by_site;
  for (const SiteFigures& site : before.sites) {
    SiteChange& c = by_site[{site.device, &site.key}];
    if (!c.key) c.device = site.device, c.key = &site.key;
    add_to_side(c.before, site, measure);
  }
  for (const SiteFigures& site : after.sites) {
    SiteChange& c = by_site[{site.device, &site.key}];
    if (!c.key) c.device = site.device, c.key = &site.key;
    add_to_side(c.after, site, measure);
  }
  std::vector<SiteChange> sites;
  sites.reserve(by_site.size());
  *matched = 0;
  for (auto& [where, change] : by_site) {
    finish_site(change, measure);
    *matched += change.before && change.after;
    sites.push_back(std::move(change));
  }
  sort_moved_most_first(sites);
  return sites;
}

std::vector<CategoryChange> diff_categories(const DeviceFigures* before, const DeviceFigures* after) {
  std::vector<CategoryChange> out;
  auto find = [&](const std::string& name) {
    return std::find_if(out.begin(), out.end(), [&](const CategoryChange& c) { return c.name == name; });
  };
  if (before)
    for (const auto& [name, bytes] : before->category_bytes) {
      auto at = find(name);
      if (at == out.end()) at = out.insert(out.end(), CategoryChange{name, std::nullopt, std::nullopt, std::nullopt});
      at->before_bytes = saturating_add(at->before_bytes.value_or(0), bytes);
    }
  if (after)
    for (const auto& [name, bytes] : after->category_bytes) {
      auto at = find(name);
      if (at == out.end()) at = out.insert(out.end(), CategoryChange{name, std::nullopt, std::nullopt, std::nullopt});
      at->after_bytes = saturating_add(at->after_bytes.value_or(0), bytes);
    }
  for (CategoryChange& c : out)
    if (c.before_bytes && c.after_bytes) c.change_bytes = signed_change(*c.before_bytes, *c.after_bytes);
  return out;
}

// Both name the device (or give its memory) and the names (or sizes) differ.
bool other_device(const DeviceFigures& a, const DeviceFigures& b) {
  return (!a.name.empty() && !b.name.empty() && a.name != b.name) ||
         (a.total_bytes && b.total_bytes && a.total_bytes != b.total_bytes);
}

DeviceChange diff_device(int32_t device, const DeviceFigures* before, const DeviceFigures* after) {
  DeviceChange c;
  c.device = device;
  if (before) c.before = *before;
  if (after) c.after = *after;
  c.peak_allocated_change_bytes =
      signed_change(before ? before->peak_allocated_bytes : 0, after ? after->peak_allocated_bytes : 0);
  if (before && after && before->growth_per_iteration_bytes && after->growth_per_iteration_bytes)
    c.growth_per_iteration_change_bytes =
        signed_change(*before->growth_per_iteration_bytes, *after->growth_per_iteration_bytes);
  c.categories = diff_categories(before, after);
  c.other_gpu = before && after && other_device(*before, *after);
  return c;
}

}  // namespace

DiffResult diff(const TraceFigures& before, const TraceFigures& after) {
  DiffResult result;
  result.iterations_before = before.iterations;
  result.iterations_after = after.iterations;
  result.growth = common_measure(before, after);
  result.same_program = before.program.empty() || after.program.empty() || before.program == after.program;
  result.program_before = before.program;
  result.program_after = after.program;
  result.sites_before = before.sites.size();
  result.sites_after = after.sites.size();
  result.truncated_before = before.truncated;
  result.truncated_after = after.truncated;
  std::map<int32_t, std::pair<const DeviceFigures*, const DeviceFigures*>> devices;
  for (const auto& [device, figures] : before.devices) devices[device].first = &figures;
  for (const auto& [device, figures] : after.devices) devices[device].second = &figures;
  for (const auto& [device, sides] : devices) {
    result.devices.push_back(diff_device(device, sides.first, sides.second));
    if (result.devices.back().other_gpu) result.same_devices = false;
  }
  result.sites = diff_sites(before, after, result.growth, &result.matched_sites);
  result.changed_sites =
      size_t(std::count_if(result.sites.begin(), result.sites.end(), [](const SiteChange& c) { return c.changed(); }));
  return result;
}

namespace {

// "AFTER is TRUNCATED (the writer was cut off; read up to byte 5,679 of 6,121, last complete event at 6.202 s):
// what it lacks from then on is missing, not gone"
DiffNote truncated_note(const char* kind, const char* side, const TruncatedRead& t) {
  return {kind, std::string(side) + " is TRUNCATED (the writer was cut off; read up to byte " +
                    with_thousands(t.complete_bytes) + " of " + with_thousands(t.file_bytes) +
                    ", last complete event at " + format_seconds(seconds(t.last_event_time_ns)) +
                    "): what it lacks from then on is missing, not gone"};
}

// "NVIDIA H200 of 80.00 GiB (85,899,345,920 B)", "unnamed".
std::string device_identity(const DeviceFigures& d) {
  std::string text = d.name.empty() ? "unnamed" : d.name;
  if (d.total_bytes) text += " of " + format_bytes(d.total_bytes);
  return text;
}

}  // namespace

std::vector<DiffNote> diff_notes(const DiffResult& diff) {
  std::vector<DiffNote> notes;
  if (diff.truncated_before) notes.push_back(truncated_note("truncated_before", "BEFORE", *diff.truncated_before));
  if (diff.truncated_after) notes.push_back(truncated_note("truncated_after", "AFTER", *diff.truncated_after));
  const bool none_matched = diff.sites_before && diff.sites_after && diff.matched_sites == 0;
  // One note for the programs: where they differ, no common call site is what follows, not another question.
  if (!diff.same_program)
    notes.push_back({"other_program", "different programs (" + diff.program_before + " before, " + diff.program_after +
                                          " after)" + (none_matched ? ", no call site in both" : "") +
                                          ": compared all the same"});
  else if (none_matched)
    notes.push_back({"no_common_site",
                     "no call site is in both traces (sites match by module build id and offset, and by Python "
                     "file, function and line): are they of one program?"});
  for (const DeviceChange& d : diff.devices)
    if (d.other_gpu)
      notes.push_back({"other_gpu", "device " + std::to_string(d.device) + " is another GPU (" +
                                        device_identity(*d.before) + " before, " + device_identity(*d.after) +
                                        " after): compared all the same"});
  return notes;
}

}  // namespace memtrace
