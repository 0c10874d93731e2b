#include "report/json/peak_json.h"

#include "report/json/report_json.h"

namespace memtrace {

using nlohmann::json;

namespace {

const char* source_key(IterationSource source) {
  switch (source) {
    case IterationSource::kPythonLoop: return "python_loop";
    case IterationSource::kNvtx: return "nvtx";
    case IterationSource::kNone: break;
  }
  return "none";
}

const char* dominance_key(PeakDominance d) {
  switch (d) {
    case PeakDominance::kActivations: return "activations";
    case PeakDominance::kModelState: return "parameters_gradients_optimizer_state";
    case PeakDominance::kNone: break;
  }
  return nullptr;
}

json byte_count_json(const ByteCount& c) { return {{"bytes", c.bytes}, {"count", c.count}}; }

json outside_json(const MomentBreakdown& b) {
  if (!b.outside_applies) return nullptr;
  static constexpr const char* kKeys[] = {"cublas", "cudnn", "nccl", "other"};
  static_assert(std::size(kKeys) == kOutsideLayers.size());
  json out = {{"bytes", b.outside_bytes()}};
  for (size_t i = 0; i < kOutsideLayers.size(); ++i) out[kKeys[i]] = byte_count_json(b.outside[i]);
  return out;
}

json user_line_json(const UserLineNode& node, FrameResolver& resolver) {
  json sites = json::array();
  for (const CallSite& s : node.sites)
    sites.push_back(with_site_stack({{"bytes", s.bytes}, {"count", s.count}}, s, resolver));
  json frame = nullptr;
  if (node.user_frame)
    frame = {{"file", node.user_frame->file}, {"line", node.user_frame->line}, {"function", node.user_frame->function}};
  return {{"user_frame", frame}, {"bytes", node.bytes}, {"count", node.count}, {"sites", sites}};
}

}  // namespace

json breakdown_json(const MomentBreakdown& b) {
  json rows = json::object();
  for (size_t r = 0; r < kBreakdownRows; ++r) rows[breakdown_row_key(BreakdownRow(r))] = byte_count_json(b.rows[r]);
  const char* dominance = dominance_key(peak_dominance(b));
  const char* uncertain = dominance_key(uncertain_dominance(b));
  return {{"phases_source", source_key(b.phases_source)},
          {"iteration", b.iteration && *b.iteration >= 0 ? json(*b.iteration + 1) : json(nullptr)},
          {"phase", b.iteration ? json(phase_name(b.phase)) : json(nullptr)},
          {"rows", rows},
          {"activations_kept_across_iterations", byte_count_json(b.activations_kept)},
          {"cache_bytes", b.cache_bytes ? json(*b.cache_bytes) : json(nullptr)},
          {"outside_allocator", outside_json(b)},
          {"context_and_unattributed_bytes",
           b.usage && b.usage->process_used_bytes ? json(b.usage->unattributed_bytes()) : json(nullptr)},
          {"device_usage", device_usage_json(b.usage)},
          {"unsymbolized_native_frames", byte_count_json(b.unsymbolized_total())},
          {"dominated_by", dominance ? json(dominance) : json(nullptr)},
          {"dominance_uncertain", uncertain ? json(uncertain) : json(nullptr)}};
}

json peak_json(const MomentBreakdown& b, bool at_time, const std::vector<UserLineNode>& tree,
               FrameResolver& resolver) {
  json lines = json::array();
  for (const UserLineNode& node : tree) lines.push_back(user_line_json(node, resolver));
  return {{"device", b.device},
          {"moment", at_time ? "time" : "peak_allocated"},
          {"event", b.event_index},
          {"time_s", seconds(b.time_ns)},
          {"allocated_bytes", b.totals.allocated_bytes},
          {"reserved_bytes", b.totals.reserved_bytes},
          {"driver_bytes", b.totals.driver_bytes},
          {"breakdown", breakdown_json(b)},
          {"user_lines", lines}};
}

}  // namespace memtrace
