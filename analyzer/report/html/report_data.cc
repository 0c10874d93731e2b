#include "report/html/report_data.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "analysis/iteration_report.h"
#include "analysis/oom_diagnosis.h"
#include "analysis/oom_report.h"
#include "analysis/peak_breakdown.h"
#include "model/replay.h"
#include "report/text/report_text.h"
#include "stacks/folded_stack.h"
#include "stacks/frame_roles.h"
#include "util/checked_math.h"

namespace memtrace {
namespace {

using nlohmann::json;

constexpr int64_t kMaxExactInteger = (int64_t(1) << 53) - 1;  // JavaScript's Number.MAX_SAFE_INTEGER

int64_t exact(uint64_t value) { return value > uint64_t(kMaxExactInteger) ? kMaxExactInteger : int64_t(value); }
int64_t exact(int64_t value) { return std::clamp(value, -kMaxExactInteger, kMaxExactInteger); }
int64_t exact(int32_t value) { return value; }
int64_t exact(uint32_t value) { return value; }

// ------------------------------------------------------------------------------------------------------------
// Stacks as the report shows them
// ------------------------------------------------------------------------------------------------------------

// The folded stacks (stacks/folded_stack.h) of the stacks the report names, each resolved once: stack ids that
// fold to the same labels are one group (the flame graph's stacks), and groups are gathered into the call sites
// the tables list, each under a label no other site has:
//   - a stack with Python frames is labelled by the user's line and the library function under it (site_label);
//     groups of one such label are one site: the same place in the user's code, reached through different library
//     paths (Module._apply's recursion, an encoder layer's two dropouts), which the flame graph tells apart;
//   - a stack without Python frames (a C++ program, PyTorch's autograd threads) is labelled by its innermost
//     frame, which many paths share (the allocator's entry): each group is its own site, and sites of one label
//     are told apart by " (via X)", X the frame where the stack, read from the allocation outwards, first parts
//     from the stacks of that label most like it; " #k" (k from 1, in the order seen) where that is not enough.
// Labels are final once name_sites() ran: call it after the last site_of, before reading a label.
class StackGroups {
 public:
  explicit StackGroups(FrameResolver& resolver) : resolver_(resolver) {}

  uint32_t group_of(uint64_t stack_id) {
    auto [it, inserted] = group_by_stack_.try_emplace(stack_id, 0);
    if (inserted) it->second = add_group(stack_id);
    return it->second;
  }
  uint32_t site_of(uint64_t stack_id) { return site_of_group_[group_of(stack_id)]; }
  const std::vector<std::string>& stack(uint32_t group) const { return stacks_[group]; }
  // A site's stack: that of its first group seen.
  const std::vector<std::string>& site_stack(uint32_t site) const { return stacks_[site_groups_[site]]; }
  const std::string& site_label(uint32_t site) const { return site_labels_[site]; }

  void name_sites() {
    std::map<std::string, std::vector<uint32_t>> native_by_label;
    for (uint32_t site = 0; site < site_labels_.size(); ++site)
      if (!site_python_[site]) native_by_label[site_labels_[site]].push_back(site);
    for (auto& [label, sites] : native_by_label)
      if (sites.size() > 1) add_via(sites);
    std::map<std::string, std::vector<uint32_t>> by_label;
    for (uint32_t site = 0; site < site_labels_.size(); ++site) by_label[site_labels_[site]].push_back(site);
    for (auto& [label, sites] : by_label)
      if (sites.size() > 1)
        for (size_t k = 0; k < sites.size(); ++k) site_labels_[sites[k]] += " #" + std::to_string(k + 1);
  }

 private:
  uint32_t add_group(uint64_t stack_id) {
    std::vector<FoldedFrame> folded = fold_stack(resolver_.resolve(stack_id));
    std::vector<std::string> labels;
    for (const FoldedFrame& f : folded) labels.push_back(f.label);
    auto [it, inserted] = group_by_labels_.try_emplace(labels, uint32_t(stacks_.size()));
    if (inserted) {
      const uint32_t group = it->second;
      const bool python = std::any_of(folded.begin(), folded.end(), [](const FoldedFrame& f) { return f.python; });
      std::string label = site_label(folded);
      uint32_t site = uint32_t(site_labels_.size());
      if (python) site = site_by_python_label_.try_emplace(label, site).first->second;
      if (site == site_labels_.size()) {
        site_labels_.push_back(std::move(label));
        site_python_.push_back(python);
        site_groups_.push_back(group);
      }
      site_of_group_.push_back(site);
      stacks_.push_back(std::move(labels));
    }
    return it->second;
  }
  // The line a reader knows the site by: the innermost frame of the user's own code, followed by " > " and the
  // innermost Python frame where that is library code under it (two sites of one user line differ there), else
  // the innermost Python frame, else (a C++ program) the innermost frame.
  static std::string site_label(const std::vector<FoldedFrame>& folded) {
    auto python = std::find_if(folded.rbegin(), folded.rend(), [](const FoldedFrame& f) { return f.python; });
    if (python == folded.rend()) return folded.back().label;
    auto user = std::find_if(python, folded.rend(), [](const FoldedFrame& f) { return f.user; });
    if (user == folded.rend()) return python->label;
    return user == python ? user->label : user->label + " > " + python->label;
  }
  // Appends " (via X)" to the labels of `sites` (one label, distinct stacks): X is the frame just outside the
  // longest innermost run of frames the site's stack shares with another of them. Sorted innermost frame first,
  // the stack sharing the longest such run with a stack is next to it: O(n log n) comparisons.
  void add_via(std::vector<uint32_t> sites) {
    auto frame = [&](uint32_t site, size_t from_leaf) -> const std::string& {
      const std::vector<std::string>& s = site_stack(site);
      return s[s.size() - 1 - from_leaf];
    };
    auto depth = [&](uint32_t site) { return site_stack(site).size(); };
    auto shared = [&](uint32_t a, uint32_t b) {
      size_t n = 0;
      while (n < depth(a) && n < depth(b) && frame(a, n) == frame(b, n)) ++n;
      return n;
    };
    std::sort(sites.begin(), sites.end(), [&](uint32_t a, uint32_t b) {
      size_t n = shared(a, b);
      if (n == depth(a) || n == depth(b)) return depth(a) < depth(b);
      return frame(a, n) < frame(b, n);
    });
    for (size_t i = 0; i < sites.size(); ++i) {
      size_t n = 0;
      if (i > 0) n = std::max(n, shared(sites[i], sites[i - 1]));
      if (i + 1 < sites.size()) n = std::max(n, shared(sites[i], sites[i + 1]));
      if (n < depth(sites[i])) site_labels_[sites[i]] += " (via " + frame(sites[i], n) + ")";
    }
  }

  FrameResolver& resolver_;
  std::unordered_map<uint64_t, uint32_t> group_by_stack_;
  std::map<std::vector<std::string>, uint32_t> group_by_labels_;
  std::vector<std::vector<std::string>> stacks_;  // per group, root first
  std::vector<uint32_t> site_of_group_;
  std::map<std::string, uint32_t> site_by_python_label_;
  std::vector<std::string> site_labels_;  // per site
  std::vector<bool> site_python_;
  std::vector<uint32_t> site_groups_;  // per site: its first group
};

// ------------------------------------------------------------------------------------------------------------
// The timeline: binned levels and the exact level
// ------------------------------------------------------------------------------------------------------------

// One binned level: bin k covers [k * bin_ns, (k + 1) * bin_ns); bins 0..last_bin cover [0, span].
struct LevelGeometry {
  int64_t bin_ns = 1;
  uint64_t last_bin = 0;
  uint64_t bin_of(int64_t time_ns) const {
    return std::min(uint64_t(std::max<int64_t>(time_ns, 0) / bin_ns), last_bin);
  }
};

LevelGeometry level_geometry(int64_t span_ns, uint64_t bins) {
  LevelGeometry g;
  g.bin_ns = span_ns / int64_t(std::max<uint64_t>(bins, 1)) + 1;  // bins * bin_ns > span_ns
  g.last_bin = uint64_t(span_ns / g.bin_ns);
  return g;
}

// The three totals' lowest and highest value in each bin of one device's level, from the bin of its first change
// to the last bin of the trace (every bin listed: where nothing changed, the value carried in).
class BinnedSeries {
 public:
  explicit BinnedSeries(LevelGeometry g) : g_(g) {}

  // A change of the totals at `time_ns` (not before the previous change's).
  void add(int64_t time_ns, const DeviceTotals& totals) {
    uint64_t bin = g_.bin_of(time_ns);
    if (!started_) {
      started_ = true;
      first_bin_ = bin_ = bin;
      low_ = high_ = value_;  // before its first change a device holds nothing
    } else if (bin > bin_) {
      close_bin();
      for (uint64_t b = bin_ + 1; b < bin; ++b) push_bin(b, value_, value_);
      bin_ = bin;
      low_ = high_ = value_;
    }
    value_ = totals;
    low_ = lower(low_, totals);
    high_ = higher(high_, totals);
  }
  // After the last change: the bins to the end of the trace hold the last value.
  void finish() {
    if (!started_) return;
    close_bin();
    for (uint64_t b = bin_ + 1; b <= g_.last_bin; ++b) push_bin(b, value_, value_);
  }
  bool started() const { return started_; }
  uint64_t first_bin() const { return first_bin_; }
  json to_json() const {
    return {{"bin_ns", exact(g_.bin_ns)},
            {"t_ns", t_ns_},
            {"allocated_min", column(&DeviceTotals::allocated_bytes, low_bins_)},
            {"allocated_max", column(&DeviceTotals::allocated_bytes, high_bins_)},
            {"reserved_min", column(&DeviceTotals::reserved_bytes, low_bins_)},
            {"reserved_max", column(&DeviceTotals::reserved_bytes, high_bins_)},
            {"driver_min", column(&DeviceTotals::driver_bytes, low_bins_)},
            {"driver_max", column(&DeviceTotals::driver_bytes, high_bins_)}};
  }

 private:
  static DeviceTotals lower(const DeviceTotals& a, const DeviceTotals& b) {
    return {std::min(a.allocated_bytes, b.allocated_bytes), std::min(a.reserved_bytes, b.reserved_bytes),
            std::min(a.driver_bytes, b.driver_bytes)};
  }
  static DeviceTotals higher(const DeviceTotals& a, const DeviceTotals& b) {
    return {std::max(a.allocated_bytes, b.allocated_bytes), std::max(a.reserved_bytes, b.reserved_bytes),
            std::max(a.driver_bytes, b.driver_bytes)};
  }
  static json column(uint64_t DeviceTotals::*field, const std::vector<DeviceTotals>& bins) {
    std::vector<int64_t> values;
    values.reserve(bins.size());
    for (const DeviceTotals& t : bins) values.push_back(exact(t.*field));
    return values;
  }
  void close_bin() { push_bin(bin_, low_, high_); }
  void push_bin(uint64_t bin, const DeviceTotals& low, const DeviceTotals& high) {
    t_ns_.push_back(exact(saturating_mul(int64_t(bin), g_.bin_ns)));
    low_bins_.push_back(low);
    high_bins_.push_back(high);
  }

  LevelGeometry g_;
  bool started_ = false;
  uint64_t first_bin_ = 0, bin_ = 0;
  DeviceTotals value_, low_, high_;
  std::vector<int64_t> t_ns_;
  std::vector<DeviceTotals> low_bins_, high_bins_;
};

// Every change of one device's totals, while there are at most `limit` of them.
class ExactSeries {
 public:
  explicit ExactSeries(uint64_t limit) : limit_(limit) {}
  void add(int64_t time_ns, const DeviceTotals& totals) {
    if (++changes_ > limit_) {
      points_.clear();
      points_.shrink_to_fit();
      return;
    }
    points_.emplace_back(time_ns, totals);
  }
  bool kept() const { return changes_ <= limit_; }
  json to_json() const {
    std::vector<int64_t> t, allocated, reserved, driver;
    for (const auto& [time_ns, totals] : points_) {
      t.push_back(exact(time_ns));
      allocated.push_back(exact(totals.allocated_bytes));
      reserved.push_back(exact(totals.reserved_bytes));
      driver.push_back(exact(totals.driver_bytes));
    }
    return {{"bin_ns", 0},
            {"t_ns", t},
            {"allocated_min", allocated},
            {"allocated_max", allocated},
            {"reserved_min", reserved},
            {"reserved_max", reserved},
            {"driver_min", driver},
            {"driver_max", driver}};
  }

 private:
  uint64_t limit_;
  uint64_t changes_ = 0;
  std::vector<std::pair<int64_t, DeviceTotals>> points_;
};

// One DEVICE_USAGE series thinned to at most about max_points: samples taken in runs of `stride`, each run giving
// its highest sample (its time and value), so that the series' peaks stay.
class UsageSeries {
 public:
  explicit UsageSeries(uint64_t stride) : stride_(stride) {}
  void add(int64_t time_ns, uint64_t bytes) {
    if (in_run_ == 0 || bytes > best_.second) best_ = {time_ns, bytes};
    if (++in_run_ == stride_) flush();
  }
  json to_json() {
    flush();
    json points = json::array();
    for (const auto& [t, b] : points_) points.push_back({exact(t), exact(b)});
    return points;
  }

 private:
  void flush() {
    if (in_run_ == 0) return;
    points_.push_back(best_);
    in_run_ = 0;
  }
  uint64_t stride_;
  uint64_t in_run_ = 0;
  std::pair<int64_t, uint64_t> best_;
  std::vector<std::pair<int64_t, uint64_t>> points_;
};

// ------------------------------------------------------------------------------------------------------------
// The first pass of its own: timeline levels, DEVICE_USAGE, each site's highest live bytes, phase spans
// ------------------------------------------------------------------------------------------------------------

// A phase of one iteration, from its first event on.
struct PhaseRun {
  int32_t iteration = -1;
  Phase phase = Phase::kOutside;
  int64_t begin_ns = 0;
};

struct DeviceTimeline {
  std::vector<BinnedSeries> levels;
  ExactSeries exact;
  UsageSeries device_used, process_used, other_processes;
  // Per StackGroups site: the live bytes of the allocated kind now, and the most they reached.
  std::vector<uint64_t> site_bytes, site_max_bytes;
};

// Live bytes of the allocated kind by call site (StackGroups' sites), kept as allocations come and go (MemoryModel's
// live callback): O(1) per change.
class LiveBySite {
 public:
  LiveBySite(const MemoryModel& model, StackGroups& groups) : model_(model), groups_(groups) {}
  // The site `a` changes, where `a` is of its device's allocated kind.
  std::optional<uint32_t> site_of(const LiveAllocation& a) {
    if (!counts_as_allocated(a)) return std::nullopt;
    return groups_.site_of(a.stack_id);
  }

 private:
  bool counts_as_allocated(const LiveAllocation& a) {
    if (a.device != cached_device_ || !cached_state_) {
      auto it = model_.devices().find(a.device);
      if (it == model_.devices().end()) return false;
      cached_device_ = a.device;
      cached_state_ = &it->second;  // map nodes do not move
    }
    return cached_state_->counts_as_allocated(a);
  }
  const MemoryModel& model_;
  StackGroups& groups_;
  int32_t cached_device_ = -2;
  const DeviceState* cached_state_ = nullptr;
};

void change_bytes(std::vector<uint64_t>& bytes, uint32_t group, uint64_t size_bytes, bool live) {
  if (bytes.size() <= group) bytes.resize(group + 1, 0);
  uint64_t& b = bytes[group];
  b = live ? saturating_add(b, size_bytes) : b - std::min(b, size_bytes);
}

class TimelinePass {
 public:
  TimelinePass(const Analysis& analysis, const EventPhases& phases, StackGroups& groups,
               std::vector<LevelGeometry> levels, uint64_t exact_limit, uint64_t usage_stride,
               const ReportDataOptions& options)
      : analysis_(analysis),
        phases_(phases),
        levels_(std::move(levels)),
        exact_limit_(exact_limit),
        usage_stride_(usage_stride),
        options_(options),
        live_(model_, groups) {}

  void run() {
    model_.set_totals_callback([this](int32_t device, int64_t time_ns, const DeviceTotals& totals) {
      DeviceTimeline& d = device_timeline(device);
      clock_ns_ = std::max(clock_ns_, time_ns);
      for (BinnedSeries& level : d.levels) level.add(clock_ns_, totals);
      d.exact.add(clock_ns_, totals);
    });
    model_.set_live_callback([this](const LiveAllocation& a, bool live) {
      std::optional<uint32_t> site = live_.site_of(a);
      if (!site) return;
      DeviceTimeline& d = device_timeline(a.device);
      change_bytes(d.site_bytes, *site, a.size_bytes, live);
      if (d.site_max_bytes.size() <= *site) d.site_max_bytes.resize(*site + 1, 0);
      d.site_max_bytes[*site] = std::max(d.site_max_bytes[*site], d.site_bytes[*site]);
    });
    replay_trace(analysis_.path, analysis_.model.layer_hints(), model_, *this);
    for (auto& [device, d] : devices_)
      for (BinnedSeries& level : d.levels) level.finish();
  }

  ReplayStep after_event(const EventFields& event) {
    clock_ns_ = std::max(clock_ns_, model_.now_ns());
    if (event.kind() == proto::DEVICE_USAGE) note_usage(event.device());
    note_phase(model_.next_event_index() - 1);
    return ReplayStep::kGoOn;
  }

  std::map<int32_t, DeviceTimeline>& devices() { return devices_; }
  const std::vector<PhaseRun>& phase_runs() const { return runs_; }
  bool phase_runs_cut() const { return runs_cut_; }

 private:
  DeviceTimeline& device_timeline(int32_t device) {
    auto it = devices_.find(device);
    if (it != devices_.end()) return it->second;
    std::vector<BinnedSeries> levels;
    for (const LevelGeometry& g : levels_) levels.emplace_back(g);
    DeviceTimeline d{std::move(levels),
                     ExactSeries(exact_limit_),
                     UsageSeries(usage_stride_),
                     UsageSeries(usage_stride_),
                     UsageSeries(usage_stride_),
                     {},
                     {}};
    return devices_.emplace(device, std::move(d)).first->second;
  }

  void note_usage(int32_t device) {
    uint64_t samples = model_.health().device_usage_samples;
    if (samples == usage_samples_) return;  // the model did not take it
    usage_samples_ = samples;
    std::optional<DeviceUsage> u = model_.last_device_usage(device);
    if (!u) return;
    DeviceTimeline& d = device_timeline(device);
    d.device_used.add(u->time_ns, saturating_sub(u->device_total_bytes, u->device_free_bytes));
    if (u->process_used_bytes) d.process_used.add(u->time_ns, *u->process_used_bytes);
    if (u->other_processes_used_bytes) d.other_processes.add(u->time_ns, *u->other_processes_used_bytes);
  }

  // Phase spans: a new one wherever the (iteration, phase) of an event differs from the one before it.
  void note_phase(uint64_t event) {
    if (event >= phases_.iteration_of_event.size() || event >= phases_.phase_of_event.size()) return;
    int32_t iteration = phases_.iteration_of_event[event];
    Phase phase = phases_.phase_of_event[event];
    if (iteration < 0 || uint64_t(iteration) >= options_.max_iterations) iteration = -1;
    if (iteration == current_.iteration && phase == current_.phase) return;
    current_ = PhaseRun{iteration, phase, model_.now_ns()};
    if (iteration < 0 || phase == Phase::kOutside) return;
    if (runs_.size() >= options_.max_phase_spans) {
      runs_cut_ = true;
      return;
    }
    runs_.push_back(current_);
  }

  const Analysis& analysis_;
  const EventPhases& phases_;
  std::vector<LevelGeometry> levels_;
  uint64_t exact_limit_;
  uint64_t usage_stride_;
  const ReportDataOptions& options_;
  MemoryModel model_;
  LiveBySite live_;
  int64_t clock_ns_ = 0;  // the latest event time so far: bins are placed on a clock that never goes back
  uint64_t usage_samples_ = 0;
  std::map<int32_t, DeviceTimeline> devices_;
  PhaseRun current_;
  std::vector<PhaseRun> runs_;
  bool runs_cut_ = false;
};

// ------------------------------------------------------------------------------------------------------------
// The second pass of its own: the top sites' live bytes at the end of each coarse bin
// ------------------------------------------------------------------------------------------------------------

struct DeviceSites {
  std::vector<uint32_t> top;                     // sites, highest maximum first
  std::vector<int32_t> slot_of_site;             // site -> index in `top`, -1 for the others
  uint64_t first_bin = 0;                        // the device's coarse level starts there
  uint64_t next_bin = 0;                         // the first bin not yet written
  std::vector<uint64_t> bytes;                   // per slot, now
  uint64_t total_bytes = 0;                      // every group, now
  std::vector<std::vector<int64_t>> at_bin_end;  // per slot, per bin from first_bin
  std::vector<int64_t> other_at_bin_end;
};

class SiteBinsPass {
 public:
  SiteBinsPass(const Analysis& analysis, StackGroups& groups, LevelGeometry coarse,
               std::map<int32_t, DeviceSites>& devices)
      : analysis_(analysis), coarse_(coarse), devices_(devices), live_(model_, groups) {}

  void run() {
    model_.set_live_callback([this](const LiveAllocation& a, bool live) {
      std::optional<uint32_t> site = live_.site_of(a);
      if (!site) return;
      auto it = devices_.find(a.device);
      if (it == devices_.end()) return;
      DeviceSites& d = it->second;
      write_bins_before(d, coarse_.bin_of(std::max(clock_ns_, model_.now_ns())));
      d.total_bytes =
          live ? saturating_add(d.total_bytes, a.size_bytes) : d.total_bytes - std::min(d.total_bytes, a.size_bytes);
      if (*site < d.slot_of_site.size() && d.slot_of_site[*site] >= 0)
        change_bytes(d.bytes, uint32_t(d.slot_of_site[*site]), a.size_bytes, live);
    });
    replay_trace(analysis_.path, analysis_.model.layer_hints(), model_, *this);
    for (auto& [device, d] : devices_) write_bins_before(d, coarse_.last_bin + 1);
  }

  ReplayStep after_event(const EventFields&) {
    clock_ns_ = std::max(clock_ns_, model_.now_ns());
    return ReplayStep::kGoOn;
  }

 private:
  // Writes the values now as those at the end of every bin before `bin` not yet written.
  static void write_bins_before(DeviceSites& d, uint64_t bin) {
    if (d.next_bin < d.first_bin) d.next_bin = d.first_bin;
    if (bin <= d.next_bin) return;
    uint64_t top_bytes = 0;
    for (uint64_t b : d.bytes) top_bytes = saturating_add(top_bytes, b);
    for (; d.next_bin < bin; ++d.next_bin) {
      for (size_t slot = 0; slot < d.top.size(); ++slot) d.at_bin_end[slot].push_back(exact(d.bytes[slot]));
      d.other_at_bin_end.push_back(exact(saturating_sub(d.total_bytes, top_bytes)));
    }
  }

  const Analysis& analysis_;
  LevelGeometry coarse_;
  std::map<int32_t, DeviceSites>& devices_;
  MemoryModel model_;
  LiveBySite live_;
  int64_t clock_ns_ = 0;  // as TimelinePass's, so that both place a change in the same bin
};

// The sites with the highest maxima (ties: the lower site, first seen), at most `count`, none that never held
// a byte.
std::vector<uint32_t> top_sites(const std::vector<uint64_t>& max_bytes, size_t count) {
  std::vector<uint32_t> groups;
  for (uint32_t g = 0; g < max_bytes.size(); ++g)
    if (max_bytes[g]) groups.push_back(g);
  auto higher = [&](uint32_t a, uint32_t b) {
    return max_bytes[a] != max_bytes[b] ? max_bytes[a] > max_bytes[b] : a < b;
  };
  if (groups.size() > count) {
    std::partial_sort(groups.begin(), groups.begin() + std::ptrdiff_t(count), groups.end(), higher);
    groups.resize(count);
  } else {
    std::sort(groups.begin(), groups.end(), higher);
  }
  return groups;
}

// ------------------------------------------------------------------------------------------------------------
// The flame graph at the peak
// ------------------------------------------------------------------------------------------------------------

class FlameTree {
 public:
  explicit FlameTree(std::string root) { nodes_.push_back(Node{std::move(root), 0, {}}); }
  void add(const std::vector<std::string>& path, uint64_t bytes) {
    size_t node = 0;
    nodes_[0].value = saturating_add(nodes_[0].value, bytes);
    for (const std::string& name : path) {
      auto [it, inserted] = nodes_[node].children.try_emplace(name, nodes_.size());
      if (inserted) nodes_.push_back(Node{name, 0, {}});
      node = it->second;
      nodes_[node].value = saturating_add(nodes_[node].value, bytes);
    }
  }
  // d3-flame-graph's format: {name, value, children}, children largest first; children of less than
  // `min_bytes` merged into one node where there are two or more of them.
  json to_json(uint64_t min_bytes) const { return node_json(0, min_bytes); }
  uint64_t total_bytes() const { return nodes_[0].value; }

 private:
  struct Node {
    std::string name;
    uint64_t value = 0;
    std::map<std::string, size_t> children;
  };
  json node_json(size_t index, uint64_t min_bytes) const {
    const Node& n = nodes_[index];
    std::vector<size_t> kids;
    for (const auto& [name, child] : n.children) kids.push_back(child);
    std::stable_sort(kids.begin(), kids.end(), [&](size_t a, size_t b) { return nodes_[a].value > nodes_[b].value; });
    size_t small = 0;
    uint64_t small_bytes = 0;
    for (size_t k : kids)
      if (nodes_[k].value < min_bytes) ++small, small_bytes = saturating_add(small_bytes, nodes_[k].value);
    json children = json::array();
    for (size_t k : kids)
      if (small < 2 || nodes_[k].value >= min_bytes) children.push_back(node_json(k, min_bytes));
    if (small >= 2)
      children.push_back({{"name", "[" + std::to_string(small) + " smaller stacks]"},
                          {"value", exact(small_bytes)},
                          {"children", json::array()}});
    return {{"name", n.name}, {"value", exact(n.value)}, {"children", std::move(children)}};
  }
  std::vector<Node> nodes_;
};

json flame_at_peak(const Analysis& a, int32_t device, StackGroups& groups, double min_fraction) {
  FlameTree tree("live at peak allocated");
  if (auto sites = a.live_at_peak.find(device); sites != a.live_at_peak.end())
    for (const CallSite& site : sites->second) tree.add(groups.stack(groups.group_of(site.stack_id)), site.bytes);
  return tree.to_json(uint64_t(double(tree.total_bytes()) * min_fraction));
}

// ------------------------------------------------------------------------------------------------------------
// The other sections
// ------------------------------------------------------------------------------------------------------------

json byte_row(const std::string& category, uint64_t bytes, bool in_allocated) {
  return {{"category", category}, {"bytes", exact(bytes)}, {"in_allocated", in_allocated}};
}

// The rows of the allocated total the breakdown knows (those with allocations), then what the device holds beside
// it (not part of allocated: in_allocated false), worded as the summary's breakdown words them.
json breakdown_json(const MomentBreakdown& b) {
  json rows = json::array();
  for (size_t r = 0; r < kBreakdownRows; ++r)
    if (b.rows[r].count) rows.push_back(byte_row(breakdown_row_name(BreakdownRow(r)), b.rows[r].bytes, true));
  if (b.cache_bytes) rows.push_back(byte_row("PyTorch's cache (reserved - allocated)", *b.cache_bytes, false));
  if (b.outside_applies)
    for (size_t i = 0; i < kOutsideLayers.size(); ++i) {
      if (!b.outside[i].count) continue;
      AllocatingLayer layer = kOutsideLayers[i];
      std::string name =
          layer == AllocatingLayer::kOther ? "other (the program, other libraries)" : allocating_layer_name(layer);
      rows.push_back(byte_row("outside PyTorch's allocator: " + name, b.outside[i].bytes, false));
    }
  if (b.usage && b.usage->process_used_bytes)
    rows.push_back(byte_row("CUDA context and unattributed", b.usage->unattributed_bytes(), false));
  return rows;
}

json peak_json(const Peak& p) {
  return {{"bytes", exact(p.bytes)}, {"time_ns", exact(p.time_ns)}, {"event", exact(p.event_index)}};
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string iterations_source(const EventPhases& p) {
  switch (p.source) {
    case IterationSource::kNone: return "";
    case IterationSource::kPythonLoop:
      return "python loop " + basename_of(p.loop_file) + ":" + std::to_string(p.loop_line) + " " + p.loop_function;
    case IterationSource::kNvtx: return "NVTX ranges '" + p.range_name + "'";
  }
  return "";
}

const char* phase_key(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    default: return "other";
  }
}

// The iterations (at most max_iterations) with their phases (`runs`, in event order), each phase from its first
// event to the next phase's first event or the iteration's end, inside the iteration's span.
json iterations_json(const EventPhases& p, const std::vector<PhaseRun>& runs, size_t max_iterations) {
  json spans = json::array();
  size_t run = 0;
  for (size_t k = 0; k < p.iterations.size() && k < max_iterations; ++k) {
    const IterationSpan& span = p.iterations[k];
    const int64_t end_ns = std::max(span.begin_ns, span.end_ns);
    json phases = json::array();
    while (run < runs.size() && runs[run].iteration < int32_t(k)) ++run;
    for (; run < runs.size() && runs[run].iteration == int32_t(k); ++run) {
      int64_t begin = std::clamp(runs[run].begin_ns, span.begin_ns, end_ns);
      bool last = run + 1 >= runs.size() || runs[run + 1].iteration != int32_t(k);
      int64_t end = last ? end_ns : std::clamp(runs[run + 1].begin_ns, begin, end_ns);
      phases.push_back({{"phase", phase_key(runs[run].phase)}, {"begin_ns", exact(begin)}, {"end_ns", exact(end)}});
    }
    spans.push_back({{"index", k + 1},
                     {"begin_ns", exact(span.begin_ns)},
                     {"end_ns", exact(end_ns)},
                     {"phases", std::move(phases)}});
  }
  return {{"source", iterations_source(p)}, {"spans", std::move(spans)}};
}

json nvtx_json(const std::vector<NvtxRange>& ranges, int64_t trace_end_ns, size_t max_ranges) {
  json out = json::array();
  for (size_t i = 0; i < ranges.size() && i < max_ranges; ++i) {
    const NvtxRange& r = ranges[i];
    int64_t end = r.end_ns < 0 ? std::max(trace_end_ns, r.begin_ns) : r.end_ns;  // not closed: to the trace's end
    out.push_back({{"name", r.name}, {"begin_ns", exact(r.begin_ns)}, {"end_ns", exact(end)}, {"depth", r.depth}});
  }
  return out;
}

// The diagnosis of one OOM in one paragraph: the causes diagnose_oom finds, numbered where there are several, as
// `memtrace oom` lists them.
std::string diagnosis_text(const OomDetail& detail) {
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(detail);
  if (diagnoses.empty()) return "no usual cause matches these figures";
  if (diagnoses.size() == 1) return diagnoses[0].text;
  std::string text;
  for (size_t i = 0; i < diagnoses.size(); ++i)
    text += (i ? " " : "") + std::to_string(i + 1) + ". " + diagnoses[i].text;
  return text;
}

json oom_entry(const OomEvent& o, std::string diagnosis, StackGroups& groups) {
  uint32_t site = groups.site_of(o.stack_id);
  return {{"time_ns", exact(o.time_ns)},
          {"device", o.device},
          {"requested_bytes", exact(o.requested_bytes)},
          {"api", proto::Api_Name(o.api)},
          {"label", groups.site_label(site)},
          {"stack", json(groups.site_stack(site))},
          {"diagnosis", std::move(diagnosis)}};
}

json ooms_json(const Analysis& a, const OomReport* report, StackGroups& groups, size_t max_ooms) {
  json out = json::array();
  const std::vector<OomEvent>& listed = a.model.ooms();
  for (size_t i = 0; i < listed.size() && i < max_ooms; ++i) {
    if (report && i < report->detailed.size())
      out.push_back(oom_entry(report->detailed[i].oom, diagnosis_text(report->detailed[i]), groups));
    else
      out.push_back(oom_entry(listed[i],
                              "not diagnosed: the report diagnoses the first " + std::to_string(kMaxOomsDetailed) +
                                  " failed allocations",
                              groups));
  }
  return out;
}

// The leak candidates in the leaks report's order (the first max_leaks), candidates of one call site of the
// report (StackGroups: one user line and library function) and device merged into the row of the first: their
// bytes, allocations and growth summed, growing where one of them grows.
json leaks_json(const Analysis& a, const IterationReport& iterations, StackGroups& groups, size_t max_leaks) {
  struct Row {
    uint32_t site;
    int32_t device;
    uint64_t bytes = 0, allocations = 0;
    bool growing = false;
    uint64_t growth_bytes = 0;
  };
  std::vector<Row> rows;
  std::map<std::pair<uint32_t, int32_t>, size_t> row_of;
  for (size_t i = 0; i < a.leaks.size() && i < max_leaks; ++i) {
    const LeakSite& l = a.leaks[i];
    uint32_t site = groups.site_of(l.site.stack_id);
    auto [it, inserted] = row_of.try_emplace({site, l.site.device}, rows.size());
    if (inserted) rows.push_back(Row{site, l.site.device});
    Row& r = rows[it->second];
    r.bytes = saturating_add(r.bytes, l.site.bytes);
    r.allocations = saturating_add(r.allocations, l.site.count);
    r.growing = r.growing || l.growing;
    if (i < iterations.leak_growth_per_iteration_bytes.size())
      r.growth_bytes = saturating_add(r.growth_bytes, iterations.leak_growth_per_iteration_bytes[i]);
  }
  json out = json::array();
  for (const Row& r : rows)
    out.push_back({{"label", groups.site_label(r.site)},
                   {"stack", json(groups.site_stack(r.site))},
                   {"device", r.device},
                   {"live_bytes", exact(r.bytes)},
                   {"allocations", exact(r.allocations)},
                   {"growing", r.growing},
                   {"growth_per_iteration_bytes", iterations.found() ? json(exact(r.growth_bytes)) : json(nullptr)}});
  return out;
}

json traps_json(const std::vector<Trap>& traps) {
  json out = json::array();
  for (const Trap& t : traps)
    out.push_back({{"kind", trap_json_name(t.kind)}, {"title", t.title}, {"advice", t.advice}});
  return out;
}

// The summary's "Trace health" lines (print_health), without its heading and indent.
std::vector<std::string> health_lines(const Analysis& a, uint64_t modules_not_opened) {
  std::ostringstream text;
  print_health(text, a, modules_not_opened);
  std::vector<std::string> lines;
  std::istringstream in(text.str());
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line == "Trace health") continue;
    size_t start = line.find_first_not_of(' ');
    lines.push_back(start == std::string::npos ? "" : line.substr(start));
  }
  return lines;
}

json trace_json(const Analysis& a, int64_t span_ns) {
  std::string command, host;
  uint32_t pid = 0;
  if (a.info.start) {
    for (const std::string& arg : a.info.start->argv()) command += (command.empty() ? "" : " ") + arg;
    host = a.info.start->hostname();
    pid = a.info.start->pid();
  }
  json trace = {{"path", a.path},
                {"command", command},
                {"host", host},
                {"pid", pid},
                {"duration_ns", exact(span_ns)},
                {"events", exact(a.model.health().events)},
                {"truncated", a.read.truncated}};
  // Only for a trace that began by attach: the overview's attach line (report_text.h, describe_attach).
  if (std::string attach = describe_attach(a); !attach.empty()) trace["attach"] = attach;
  return trace;
}

// ------------------------------------------------------------------------------------------------------------
// Putting it together
// ------------------------------------------------------------------------------------------------------------

// Where the timeline ends: the trace's end, or its latest event where a damaged trace's clock went back.
int64_t timeline_span_ns(const Analysis& a) { return std::max<int64_t>({a.duration_ns(), a.last_event_time_ns, 0}); }

// The levels' bins, fewer per device where many devices have a timeline (ReportDataOptions::level_bins).
std::vector<LevelGeometry> level_geometries(const ReportDataOptions& options, size_t devices, int64_t span_ns) {
  std::vector<LevelGeometry> levels;
  for (uint64_t bins : options.level_bins) {
    if (devices > kDevicesAtFullResolution) bins = std::max(kMinLevelBins, bins * kDevicesAtFullResolution / devices);
    levels.push_back(level_geometry(span_ns, bins));
  }
  return levels;
}

size_t sites_per_device(const ReportDataOptions& options, size_t devices) {
  if (devices <= kDevicesAtFullResolution) return options.max_sites;
  return std::max<size_t>(1, options.max_sites * kDevicesAtFullResolution / devices);
}

std::map<int32_t, DeviceSites> choose_sites(std::map<int32_t, DeviceTimeline>& timelines, size_t count) {
  std::map<int32_t, DeviceSites> sites;
  for (auto& [device, t] : timelines) {
    if (t.levels.empty() || !t.levels[0].started()) continue;
    DeviceSites& d = sites[device];
    d.top = top_sites(t.site_max_bytes, count);
    d.slot_of_site.assign(t.site_max_bytes.size(), -1);
    for (size_t slot = 0; slot < d.top.size(); ++slot) d.slot_of_site[d.top[slot]] = int32_t(slot);
    d.first_bin = d.next_bin = t.levels[0].first_bin();
    d.bytes.assign(d.top.size(), 0);
    d.at_bin_end.resize(d.top.size());
  }
  return sites;
}

// The live bytes of each listed site (per slot of `sites`) at the device's peak allocated, exactly, and those of
// every other site together: Analysis::live_at_peak gathered into the sites the per-bin series use (a CallSite
// merges only stacks that differ in interpreter frames, which fold alike), so that they add up to the peak
// allocated.
std::pair<std::vector<int64_t>, uint64_t> site_bytes_at_peak(const Analysis& a, int32_t device,
                                                             const DeviceSites* sites, StackGroups& groups) {
  std::vector<uint64_t> bytes(sites ? sites->top.size() : 0, 0);
  uint64_t other_bytes = 0;
  if (auto live = a.live_at_peak.find(device); live != a.live_at_peak.end())
    for (const CallSite& site : live->second) {
      uint32_t s = groups.site_of(site.stack_id);
      int32_t slot = sites && s < sites->slot_of_site.size() ? sites->slot_of_site[s] : -1;
      if (slot >= 0) bytes[size_t(slot)] = saturating_add(bytes[size_t(slot)], site.bytes);
      else other_bytes = saturating_add(other_bytes, site.bytes);
    }
  std::vector<int64_t> out;
  for (uint64_t b : bytes) out.push_back(exact(b));
  return {std::move(out), other_bytes};
}

json device_json(const Analysis& a, int32_t device, DeviceTimeline& t, DeviceSites* sites, StackGroups& groups,
                 const std::map<int32_t, MomentBreakdown>& breakdowns, const ReportDataOptions& options) {
  const proto::Device* info = device >= 0 ? a.info.device(uint32_t(device)) : nullptr;
  json levels = json::array();
  for (size_t i = 0; i < t.levels.size(); ++i)
    levels.push_back(i + 1 == t.levels.size() && t.exact.kept() && i > 0 ? t.exact.to_json() : t.levels[i].to_json());
  json peaks = json::object();
  if (auto state = a.model.devices().find(device); state != a.model.devices().end())
    peaks = {{"allocated", peak_json(state->second.peak_allocated())},
             {"reserved", peak_json(state->second.peak_reserved())},
             {"driver", peak_json(state->second.peak_driver)}};
  json site_list = json::array(), site_bytes = json::array(), other = json::array();
  if (sites) {
    for (size_t slot = 0; slot < sites->top.size(); ++slot) {
      uint32_t site = sites->top[slot];
      site_list.push_back({{"label", groups.site_label(site)},
                           {"stack", json(groups.site_stack(site))},
                           {"max_bytes", exact(t.site_max_bytes[site])}});
      site_bytes.push_back(std::move(sites->at_bin_end[slot]));
    }
    other = std::move(sites->other_at_bin_end);
  }
  auto [at_peak, other_at_peak] = site_bytes_at_peak(a, device, sites, groups);
  auto breakdown = breakdowns.find(device);
  return {{"device", device},
          {"name", info ? info->name() : ""},
          {"total_bytes", info ? exact(info->total_bytes()) : 0},
          {"timeline",
           {{"levels", std::move(levels)},
            {"device_used", t.device_used.to_json()},
            {"process_used", t.process_used.to_json()},
            {"other_processes", t.other_processes.to_json()},
            {"peaks", std::move(peaks)}}},
          {"sites", std::move(site_list)},
          {"site_bytes", std::move(site_bytes)},
          {"other_site_bytes", std::move(other)},
          {"site_bytes_at_peak", std::move(at_peak)},
          {"other_site_bytes_at_peak", exact(other_at_peak)},
          {"flame_at_peak", flame_at_peak(a, device, groups, options.flame_min_fraction)},
          {"breakdown_at_peak", breakdown == breakdowns.end() ? json::array() : breakdown_json(breakdown->second)}};
}

// What the report leaves out, said where the trace's health is.
std::vector<std::string> cut_lines(const Analysis& a, const IterationReport& iterations, bool phase_runs_cut,
                                   const ReportDataOptions& options) {
  std::vector<std::string> lines;
  auto cut = [&](size_t total, size_t kept, const std::string& what) {
    if (total > kept)
      lines.push_back("the report shows the first " + std::to_string(kept) + " of " + std::to_string(total) + " " +
                      what);
  };
  cut(a.nvtx_ranges.size(), options.max_nvtx_ranges, "NVTX ranges");
  cut(iterations.phases.iterations.size(), options.max_iterations, "iterations");
  cut(a.model.ooms().size(), options.max_ooms, "failed allocations listed");
  cut(a.leaks.size(), options.max_leaks, "leak candidates");
  if (phase_runs_cut)
    lines.push_back("the report shows the first " + std::to_string(options.max_phase_spans) + " phase spans");
  return lines;
}

}  // namespace

json report_data(const Analysis& a, FrameResolver& resolver, const Symbolizer* symbolizer,
                 const ReportDataOptions& options) {
  const IterationReport iterations = analyze_iterations(a, resolver, a.nvtx_ranges);
  const std::map<int32_t, MomentBreakdown> breakdowns = breakdowns_at_peaks(a, iterations.phases, resolver);
  std::optional<OomReport> oom_report;
  if (!a.model.ooms().empty()) oom_report = build_oom_report(a);

  StackGroups groups(resolver);
  const int64_t span_ns = timeline_span_ns(a);
  const size_t device_count = a.model.devices().size();
  std::vector<LevelGeometry> levels = level_geometries(options, device_count, span_ns);
  const uint64_t exact_limit = levels.empty() ? 0 : levels.back().last_bin + 1;
  const uint64_t usage_samples = a.model.health().device_usage_samples;
  const uint64_t max_points = std::max<uint64_t>(options.max_usage_points, 1);
  const uint64_t usage_stride = std::max<uint64_t>(1, usage_samples / max_points + (usage_samples % max_points != 0));
  TimelinePass timeline(a, iterations.phases, groups, levels, exact_limit, usage_stride, options);
  timeline.run();

  std::map<int32_t, DeviceSites> sites = choose_sites(timeline.devices(), sites_per_device(options, device_count));
  if (!levels.empty()) SiteBinsPass(a, groups, levels.front(), sites).run();

  // Every stack the report labels has its site before the labels are made final (StackGroups::name_sites).
  for (const auto& [device, live] : a.live_at_peak)
    for (const CallSite& site : live) groups.site_of(site.stack_id);
  for (size_t i = 0; i < a.leaks.size() && i < options.max_leaks; ++i) groups.site_of(a.leaks[i].site.stack_id);
  for (size_t i = 0; i < a.model.ooms().size() && i < options.max_ooms; ++i) groups.site_of(a.model.ooms()[i].stack_id);
  if (oom_report)
    for (const OomDetail& detail : oom_report->detailed) groups.site_of(detail.oom.stack_id);
  groups.name_sites();

  json devices = json::array();
  for (auto& [device, t] : timeline.devices()) {
    auto s = sites.find(device);
    devices.push_back(device_json(a, device, t, s == sites.end() ? nullptr : &s->second, groups, breakdowns, options));
  }
  json ooms = ooms_json(a, oom_report ? &*oom_report : nullptr, groups, options.max_ooms);
  json leaks = leaks_json(a, iterations, groups, options.max_leaks);
  // Last: every stack the report names is symbolized by now.
  std::vector<std::string> health = health_lines(a, symbolizer ? symbolizer->modules_not_opened() : 0);
  for (std::string& line : cut_lines(a, iterations, timeline.phase_runs_cut(), options))
    health.push_back(std::move(line));
  json trace = trace_json(a, span_ns);
  trace["health"] = std::move(health);
  return {{"format", 1},
          {"trace", std::move(trace)},
          {"devices", std::move(devices)},
          {"iterations", iterations_json(iterations.phases, timeline.phase_runs(), options.max_iterations)},
          {"nvtx", nvtx_json(a.nvtx_ranges, span_ns, options.max_nvtx_ranges)},
          {"ooms", std::move(ooms)},
          {"leaks", std::move(leaks)},
          {"traps", traps_json(iterations.traps)}};
}

std::string embeddable_json(const json& data) {
  std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 64);
  for (char c : text) {
    if (c == '<') out += "\\u003c";  // only inside strings: JSON has no '<' of its own
    else out += c;
  }
  return out;
}

}  // namespace memtrace
