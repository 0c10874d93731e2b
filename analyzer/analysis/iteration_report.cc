#include "analysis/iteration_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "stacks/call_sites.h"
#include "stacks/frame_roles.h"

namespace memtrace {
namespace {

// The device with the highest peak allocated (the lowest ordinal on ties); -1 without devices.
int32_t measured_device(const Analysis& analysis) {
  int32_t device = -1;
  uint64_t best = 0;
  for (const auto& [ordinal, state] : analysis.model.devices()) {
    if (ordinal < 0) continue;
    if (device < 0 || state.peak_allocated().bytes > best) {
      device = ordinal;
      best = state.peak_allocated().bytes;
    }
  }
  return device;
}

// "transformers" for ".../site-packages/transformers/models/gpt2/modeling_gpt2.py"; "" outside site-packages.
std::string package_of(const std::string& file) {
  for (std::string_view marker : {"/site-packages/", "/dist-packages/"}) {
    size_t at = file.rfind(marker);
    if (at == std::string::npos) continue;
    size_t begin = at + marker.size();
    size_t end = file.find('/', begin);
    std::string name = file.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0) name.resize(name.size() - 3);
    return name;
  }
  return "";
}

// The group key of a stack (LeakGroup's rule) and the libraries below it.
struct UserLine {
  std::tuple<bool, std::string, std::string, uint32_t> key;  // (has_python, file, function, line)
  std::set<std::string> libraries;
};

UserLine user_line_of(const ResolvedStack& stack) {
  std::vector<const Frame*> python;  // outermost first
  for (auto it = stack.frames.rbegin(); it != stack.frames.rend(); ++it)
    if (it->python) python.push_back(&*it);
  UserLine u;
  if (python.empty()) {
    u.key = {false, "", "", 0};
    return u;
  }
  const Frame* line = nullptr;
  size_t k = 0;
  for (; k < python.size() && is_user_frame(*python[k]); ++k) line = python[k];
  if (!line) line = python.back();  // no user frame at the top: group by the innermost frame
  if (k == python.size()) line = python.back();
  for (; k < python.size(); ++k)
    if (std::string p = package_of(python[k]->file); !p.empty()) u.libraries.insert(p);
  u.key = {true, line->file, line->function, line->line};
  return u;
}

// The stack of a site with the most bytes (the lowest id on ties).
uint64_t most_kept_stack(const std::map<uint64_t, uint64_t>& bytes_of_stack) {
  uint64_t stack = 0, most = 0;
  for (const auto& [id, bytes] : bytes_of_stack)
    if (bytes > most) most = bytes, stack = id;
  return stack;
}

// A stack's user line (LeakGroup's rule) as "iteration_jobs.py:76 train"; "" without Python frames.
std::string user_line_text(const ResolvedStack& stack) {
  const auto& [has_python, file, function, line] = user_line_of(stack).key;
  if (!has_python) return "";
  const size_t slash = file.find_last_of('/');
  return (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" + std::to_string(line) + " " + function;
}

// Each leak candidate's growth per iteration, from its allocations live at exit.
void leak_growth(const Analysis& analysis, const SiteGrouping& grouping, IterationReport& report) {
  const size_t n = report.phases.iterations.size();
  std::map<std::pair<int32_t, uint64_t>, size_t> leak_of_site;
  for (size_t i = 0; i < analysis.leaks.size(); ++i)
    leak_of_site[{analysis.leaks[i].site.device, grouping.site_of(analysis.leaks[i].site.stack_id)}] = i;
  std::vector<std::vector<uint64_t>> kept(analysis.leaks.size(), std::vector<uint64_t>(n, 0));
  for (const LiveAllocation& a : analysis.model.live_at_exit()) {
    if (a.event_index >= report.phases.iteration_of_event.size()) continue;
    int32_t k = report.phases.iteration_of_event[a.event_index];
    if (k < 0) continue;
    auto site = leak_of_site.find({a.device, grouping.site_of(a.stack_id)});
    if (site != leak_of_site.end()) kept[site->second][size_t(k)] += a.size_bytes;
  }
  for (size_t i = 0; i < analysis.leaks.size(); ++i)
    report.leak_growth_per_iteration_bytes[i] = median_from_second(kept[i]);
}

// The sites that kept allocations from the iterations to the last one's end, rolled up under the user's line
// (report.groups); returns what the forward phase kept, for the kept-graph trap.
ForwardKept group_kept_sites(const Analysis& analysis, const SiteGrouping& grouping, FrameResolver& resolver,
                             IterationReport& report) {
  const size_t n = report.phases.iterations.size();
  struct SiteKept {
    std::map<uint64_t, uint64_t> bytes_of_stack;
    std::vector<uint64_t> per_iteration, forward_per_iteration;
  };
  std::map<uint64_t, SiteKept> sites;  // by site id
  ForwardKept forward;
  forward.per_iteration_bytes.assign(n, 0);
  for (const KeptAllocation& a : report.figures.kept_at_last_end) {
    SiteKept& s = sites[grouping.site_of(a.stack_id)];
    if (s.per_iteration.empty()) s.per_iteration.assign(n, 0), s.forward_per_iteration.assign(n, 0);
    s.bytes_of_stack[a.stack_id] += a.size_bytes;
    s.per_iteration[a.iteration] += a.size_bytes;
    if (a.phase == Phase::kForward) {
      s.forward_per_iteration[a.iteration] += a.size_bytes;
      forward.per_iteration_bytes[a.iteration] += a.size_bytes;
    }
  }
  std::map<std::tuple<bool, std::string, std::string, uint32_t>, size_t> group_of_line;
  std::vector<std::vector<uint64_t>> group_kept;
  for (const auto& [site_id, s] : sites) {
    if (uint64_t forward_bytes = median_from_second(s.forward_per_iteration); forward_bytes > 0) {
      ++forward.sites_every_iteration;
      // Named only where it is the one such site (the kept-tensor trap); the stack with most kept bytes names it.
      forward.lone_site_per_iteration_bytes = forward_bytes;
      forward.lone_site_line = user_line_text(resolver.resolve(most_kept_stack(s.bytes_of_stack)));
    }
    GrowingSite site;
    site.growth_per_iteration_bytes = median_from_second(s.per_iteration);
    if (site.growth_per_iteration_bytes == 0) continue;
    uint64_t most = 0;
    for (const auto& [stack, bytes] : s.bytes_of_stack) {
      site.kept_bytes += bytes;
      if (bytes > most) most = bytes, site.stack_id = stack;
    }
    UserLine u = user_line_of(resolver.resolve(site.stack_id));
    auto [it, added] = group_of_line.emplace(u.key, report.groups.size());
    if (added) {
      LeakGroup g;
      std::tie(g.has_python, g.file, g.function, g.line) = u.key;
      report.groups.push_back(g);
      group_kept.emplace_back(n, 0);
    }
    LeakGroup& g = report.groups[it->second];
    g.sites.push_back(site);
    for (const std::string& library : u.libraries)
      if (std::find(g.libraries.begin(), g.libraries.end(), library) == g.libraries.end())
        g.libraries.push_back(library);
    for (size_t k = 0; k < n; ++k) group_kept[it->second][k] += s.per_iteration[k];
  }
  for (size_t g = 0; g < report.groups.size(); ++g) {
    LeakGroup& group = report.groups[g];
    group.growth_per_iteration_bytes = median_from_second(group_kept[g]);
    std::sort(group.libraries.begin(), group.libraries.end());
    std::stable_sort(group.sites.begin(), group.sites.end(), [](const GrowingSite& a, const GrowingSite& b) {
      return a.growth_per_iteration_bytes > b.growth_per_iteration_bytes;
    });
  }
  std::stable_sort(report.groups.begin(), report.groups.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.growth_per_iteration_bytes > b.growth_per_iteration_bytes;
  });
  return forward;
}

}  // namespace

IterationReport analyze_iterations(const Analysis& analysis, FrameResolver& resolver,
                                   const std::vector<NvtxRange>& nvtx) {
  IterationReport report;
  report.leak_growth_per_iteration_bytes.assign(analysis.leaks.size(), 0);
  EventOrigins events = collect_event_origins(analysis.path);
  report.phases = find_iterations(events, analysis.stacks, resolver, nvtx);
  events = {};
  if (!report.found()) return report;
  report.figures =
      measure_iterations(analysis.path, analysis.model.layer_hints(), report.phases, measured_device(analysis));

  SiteGrouping grouping(analysis.stacks);
  leak_growth(analysis, grouping, report);
  ForwardKept forward = group_kept_sites(analysis, grouping, resolver, report);
  forward.backward_seen = std::find(report.phases.phase_of_event.begin(), report.phases.phase_of_event.end(),
                                    Phase::kBackward) != report.phases.phase_of_event.end();
  report.traps = find_traps(report.figures, forward);
  return report;
}

}  // namespace memtrace
