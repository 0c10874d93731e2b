#include "report/json/report_json.h"

#include "read/trace_end.h"
#include "util/format.h"

namespace memtrace {

using nlohmann::json;

json frames_json(const std::vector<Frame>& frames) {
  json out = json::array();
  for (const Frame& f : frames) {
    json frame = {{"function", f.function}, {"file", f.file}, {"line", f.line}, {"python", f.python}};
    if (!f.python) {
      frame["module"] = f.module;
      frame["module_offset"] = f.module_offset;
    }
    out.push_back(std::move(frame));
  }
  return out;
}

json with_stack(json site, const ResolvedStack& stack) {
  site["frames"] = frames_json(stack.frames);
  site["native_frames_cut"] = stack.cuts.native_frames_cut;
  site["python_frames_cut"] = stack.cuts.python_frames_cut;
  // Only when true: outputs of stacks without it stay as they were.
  if (stack.python_frames_from_backward) site["python_frames_from_backward"] = true;
  return site;
}

json with_site_stack(json fields, const CallSite& site, FrameResolver& resolver) {
  if (site.stack_count > 1) fields["merged_stack_count"] = site.stack_count;
  return with_stack(std::move(fields), resolver.resolve(site.stack_id));
}

namespace {
json mismatch_json(const FigureMismatch& m, const char* replay_key, const char* trace_key) {
  return {{"events", m.events}, {"first_event", m.event_index}, {"first_time_s", seconds(m.time_ns)},
          {"device", m.device}, {replay_key, m.replay_bytes},   {trace_key, m.trace_bytes}};
}

// The health figures of values no tracer writes, each only where non-zero (a clean trace's report has none).
void add_hostile_values(json& trace, const TraceHealth& h, const RecordCuts& cuts) {
  auto add_count = [&](const char* key, uint64_t count) {
    if (count) trace[key] = count;
  };
  add_count("events_with_bad_device", h.events_with_bad_device);
  add_count("implausible_sizes", h.implausible_sizes);
  add_count("implausible_time_deltas", h.implausible_time_deltas);
  add_count("graph_launches_not_replayed", h.graph_launches_not_replayed);
  add_count("graph_instantiations_not_kept", h.graph_instantiations_not_kept);
  add_count("stacks_cut", cuts.stacks_cut);
  add_count("strings_cut", cuts.strings_cut);
  add_count("ids_redefined", cuts.ids_redefined);
  if (h.allocated_vs_pytorch.events)
    trace["allocated_vs_pytorch"] = mismatch_json(h.allocated_vs_pytorch, "memtrace_bytes", "pytorch_bytes");
  if (h.allocated_above_reserved.events)
    trace["allocated_above_reserved"] = mismatch_json(h.allocated_above_reserved, "allocated_bytes", "reserved_bytes");
}
// A figure a record may leave out (`optional` in proto/memtrace.proto): null where it does.
json optional_figure(bool present, uint64_t value) { return present ? json(value) : json(nullptr); }

// `trace.attach`: how an attached trace began, what was live at attach per device, the baselines, and what of it
// was still live at the end (docs/json.md).
json attach_json(const Analysis& a) {
  const proto::TraceStart& start = *a.info.start;
  json devices = json::array();
  for (const auto& [device, f] : a.model.attach_facts()) {
    json baseline = nullptr;
    if (f.baseline) {
      const proto::AttachBaseline& b = *f.baseline;
      baseline = {{"device_free_bytes", b.device_free_bytes()},
                  {"device_total_bytes", b.device_total_bytes()},
                  {"allocator_allocated_bytes",
                   optional_figure(b.has_allocator_allocated_bytes(), b.allocator_allocated_bytes())},
                  {"allocator_reserved_bytes",
                   optional_figure(b.has_allocator_reserved_bytes(), b.allocator_reserved_bytes())},
                  {"process_used_bytes", optional_figure(b.has_process_used_bytes(), b.process_used_bytes())}};
    }
    devices.push_back({{"device", device},
                       {"block_allocations", f.block_allocations},
                       {"block_bytes", f.block_bytes},
                       {"driver_allocations", f.driver_allocations},
                       {"driver_bytes", f.driver_bytes},
                       {"block_frees", f.block_frees},
                       {"driver_frees", f.driver_frees},
                       {"unlisted_block_bytes", f.unlisted_bytes},
                       {"baseline", baseline}});
  }
  json still_live = json::array();
  for (const BeforeAttachLive& b : a.model.before_attach_live_at_exit())
    still_live.push_back({{"device", b.device},
                          {"layer", b.layer == proto::LAYER_DRIVER ? "driver" : "block"},
                          {"allocations", b.allocations},
                          {"bytes", b.bytes},
                          {"unlisted_bytes", b.unlisted_bytes}});
  const TraceHealth& h = a.model.health();
  json attach = {{"origin", origin_name(start.origin())},
                 {"attach_number", start.attach_number()},
                 {"driver_layer_attached", start.driver_layer_attached()},
                 {"torch_layer_attached", start.torch_layer_attached()},
                 {"devices", devices},
                 {"still_live_at_exit", still_live},
                 {"frees_of_unlisted_blocks", h.frees_of_unlisted_before_attach},
                 {"live_at_attach_after_events", h.live_at_attach_after_events},
                 {"records_with_bad_device", h.attach_records_with_bad_device}};
  if (h.allocated_vs_attach_baseline.events)
    attach["allocated_vs_baseline"] = mismatch_json(h.allocated_vs_attach_baseline, "memtrace_bytes", "pytorch_bytes");
  return attach;
}

}  // namespace

void add_symbolizer_health(json& trace, const Symbolizer& symbolizer) {
  if (uint64_t count = symbolizer.modules_not_opened()) trace["modules_not_opened"] = count;
}

json trace_json(const Analysis& a) {
  const TraceHealth& h = a.model.health();
  json notices = json::array();
  for (const proto::Notice& n : a.info.notices)
    notices.push_back({{"code", notice_code_name(n.code())}, {"message", n.message()}, {"count", n.count()}});
  json trace = {
      {"file", a.path},
      {"events", h.events},
      {"records", a.read.records},
      {"chunks", a.read.chunks},
      {"truncated", a.read.truncated},
      {"complete_bytes", a.read.complete_bytes},
      {"truncated_tail", a.read.tail},
      {"records_with_invalid_text", a.read.records_with_invalid_text},
      {"ended_normally", a.info.end && a.info.end->how() == proto::TraceEnd::EXIT},
      {"last_event_time_s", seconds(a.last_event_time_ns)},
      {"teardown_frees", h.teardown_frees},
      {"backward_timestamps", h.backward_timestamps},
      {"ooms_not_listed", h.ooms_not_listed},
      {"duration_s", seconds(a.duration_ns())},
      {"allocator_layer", a.allocator_layer_seen()},
      {"unknown_frees", h.unknown_frees},
      {"double_frees", h.double_frees},
      {"duplicate_allocations", h.duplicate_allocations},
      {"failed_allocations", a.model.failed_allocation_count()},
      {"failed_frees", h.failed_frees},
      {"managed_allocations", h.managed_allocations},
      {"maps", h.maps},
      {"unmaps", h.unmaps},
      {"address_reserves", h.address_reserves},
      {"address_frees", h.address_frees},
      {"unknown_graph_launches", h.unknown_graph_launches},
      {"graph_nodes_not_kept", h.graph_nodes_not_kept},
      {"pool_samples", h.pool_samples},
      {"device_usage_samples", h.device_usage_samples},
      {"notices", notices},
  };
  add_hostile_values(trace, h, a.stacks.record_cuts());
  trace["python_finalizing_time_s"] =
      a.model.finalizing_time_ns() ? json(seconds(*a.model.finalizing_time_ns())) : json(nullptr);
  if (a.info.start) {
    trace["pid"] = a.info.start->pid();
    trace["hostname"] = a.info.start->hostname();
    trace["argv"] = std::vector<std::string>(a.info.start->argv().begin(), a.info.start->argv().end());
    trace["tracer_version"] = a.info.start->tracer_version();
    // The CPython whose frames were read, as "3.12.3"; null where none were (no Python, an unsupported version,
    // MEMTRACE_PYTHON_FRAMES=0).
    const uint32_t python_hex = a.info.start->python_frames();
    trace["python_version"] = python_hex ? json(format_python_version(python_hex)) : json(nullptr);
    // The tracer's native depth per stack (null: a trace from a tracer that did not record it).
    trace["max_native_frames"] =
        a.info.start->has_max_native_frames() ? json(a.info.start->max_native_frames()) : json(nullptr);
    trace["max_native_frames_python"] =
        a.info.start->has_max_native_frames_python() ? json(a.info.start->max_native_frames_python()) : json(nullptr);
    // CLOCK_MONOTONIC at time zero: every time_s is seconds since this moment.
    trace["start_monotonic_ns"] = a.info.start->start_monotonic_ns();
    // Only for a trace that began by attach (or is a snapshot): a trace from launch has no `attach` key.
    if (began_at_attach(a)) trace["attach"] = attach_json(a);
  }
  // How the process ended; "how" is null when the trace has no end record (it was cut off).
  trace["end"] = a.info.end ? json{{"how", end_how_name(*a.info.end)}, {"signal", a.info.end->signal()}}
                            : json{{"how", nullptr}, {"signal", 0}};
  // Truncated or not: the last event that was read completely, as seconds from the start and UTC.
  trace["last_complete_time_s"] = seconds(a.last_event_time_ns);
  auto unix_ns = a.last_event_unix_ns();
  trace["last_complete_utc"] = unix_ns ? json(format_utc(*unix_ns)) : json(nullptr);
  if (a.info.end) trace["dropped_events"] = a.info.end->dropped_events();
  return trace;
}

static json sites_json(const std::vector<CallSite>& sites, FrameResolver& resolver) {
  json out = json::array();
  for (const CallSite& s : sites)
    out.push_back(with_site_stack({{"device", s.device}, {"bytes", s.bytes}, {"count", s.count}}, s, resolver));
  return out;
}

json fragmentation_json(const Fragmentation& f) {
  return {{"reserved_minus_allocated_bytes", f.reserved_minus_allocated_bytes},
          {"segments_known", f.segments_known},
          {"segment_count", f.segments_known ? json(f.segment_count) : json(nullptr)},
          {"largest_free_block_bytes", f.segments_known ? json(f.largest_free_block_bytes) : json(nullptr)}};
}

static json optional_bytes(const std::optional<uint64_t>& bytes) { return bytes ? json(*bytes) : json(nullptr); }

json device_usage_json(const std::optional<DeviceUsage>& u) {
  if (!u) return nullptr;
  return {{"time_s", seconds(u->time_ns)},
          {"api", proto::Api_Name(u->api)},
          {"device_free_bytes", u->device_free_bytes},
          {"device_total_bytes", u->device_total_bytes},
          {"process_used_bytes", optional_bytes(u->process_used_bytes)},
          {"other_processes_used_bytes", optional_bytes(u->other_processes_used_bytes)},
          {"accounted_bytes", u->accounted_bytes},
          {"context_and_unattributed_bytes", u->process_used_bytes ? json(u->unattributed_bytes()) : json(nullptr)}};
}

json process_json(const Analysis& a) {
  const ProcessTotals& p = a.model.process_totals();
  return {{"host_pinned_bytes", p.host_pinned_bytes},
          {"peak_host_pinned_bytes", p.peak_host_pinned.bytes},
          {"host_registered_bytes", p.host_registered_bytes},
          {"peak_host_registered_bytes", p.peak_host_registered.bytes},
          {"address_space_reserved_bytes", p.address_space_reserved_bytes},
          {"peak_address_space_reserved_bytes", p.peak_address_space_reserved.bytes}};
}

json devices_json(const Analysis& a, FrameResolver& resolver) {
  json out = json::array();
  for (const auto& [device, d] : a.model.devices()) {
    DeviceTotals final_totals = d.totals();
    json entry = {
        {"device", device},
        {"peak_allocated_bytes", d.peak_allocated().bytes},
        {"peak_allocated_time_s", seconds(d.peak_allocated().time_ns)},
        {"peak_allocated_event", d.peak_allocated().event_index},
        {"peak_reserved_bytes", d.peak_reserved().bytes},
        {"peak_reserved_time_s", seconds(d.peak_reserved().time_ns)},
        {"peak_reserved_event", d.peak_reserved().event_index},
        {"peak_driver_bytes", d.peak_driver.bytes},
        {"peak_driver_time_s", seconds(d.peak_driver.time_ns)},
        {"peak_driver_event", d.peak_driver.event_index},
        {"final_allocated_bytes", final_totals.allocated_bytes},
        {"final_reserved_bytes", final_totals.reserved_bytes},
        {"final_driver_bytes", final_totals.driver_bytes},
        {"driver_allocations", d.driver_allocations},
        {"driver_frees", d.driver_frees},
        {"block_allocations", d.block_allocations},
        {"block_frees", d.block_frees},
        {"allocator_layer", d.allocator_layer_seen},
        {"block_layer", d.block_layer_seen},
        {"final_array_bytes", d.array_bytes},
        {"peak_array_bytes", d.peak_array.bytes},
        {"final_managed_bytes", d.managed_bytes},
        {"peak_managed_bytes", d.peak_managed.bytes},
        {"final_imported_bytes", d.imported_bytes},
        {"peak_imported_bytes", d.peak_imported.bytes},
        {"final_graph_bytes", d.graph_bytes()},
        {"peak_graph_bytes", d.peak_graph.bytes},
        {"final_pools_reserved_bytes", d.pools_reserved_bytes()},
        {"peak_pools_reserved_bytes", d.peak_pools_reserved.bytes},
        {"context_destroys", d.context_destroys},
        {"context_freed_bytes", d.context_freed_bytes},
        {"device_usage", {{"last", device_usage_json(d.last_usage)}, {"peak", device_usage_json(d.peak_usage)}}},
    };
    auto at_peak = a.fragmentation_at_peak.find(device);
    auto final_fragmentation = a.final_fragmentation.find(device);
    entry["fragmentation"] = {{"at_peak_allocated", at_peak == a.fragmentation_at_peak.end()
                                                        ? json(nullptr)
                                                        : fragmentation_json(at_peak->second)},
                              {"final", final_fragmentation == a.final_fragmentation.end()
                                            ? json(nullptr)
                                            : fragmentation_json(final_fragmentation->second)}};
    auto peak = a.live_at_peak.find(device);
    entry["live_at_peak"] = peak == a.live_at_peak.end() ? json::array() : sites_json(peak->second, resolver);
    out.push_back(std::move(entry));
  }
  return out;
}

json leaks_json(const Analysis& a, FrameResolver& resolver, const IterationReport* iterations) {
  json out = json::array();
  for (size_t i = 0; i < a.leaks.size(); ++i) {
    const LeakSite& l = a.leaks[i];
    json fields = {{"device", l.site.device},
                   {"bytes", l.site.bytes},
                   {"count", l.site.count},
                   {"growing", l.growing},
                   {"growth_count", l.growth_count},
                   {"growth_bytes_per_step", l.growth_bytes_per_step},
                   {"median_interval_s", l.median_interval_s}};
    if (iterations && iterations->found())
      fields["growth_per_iteration_bytes"] = iterations->leak_growth_per_iteration_bytes[i];
    out.push_back(with_site_stack(std::move(fields), l.site, resolver));
  }
  return out;
}

namespace {

const char* source_json_name(IterationSource source) {
  switch (source) {
    case IterationSource::kNone: return "none";
    case IterationSource::kPythonLoop: return "python_loop";
    case IterationSource::kNvtx: return "nvtx";
  }
  return "none";
}

json optional_signed(const std::optional<int64_t>& value) { return value ? json(*value) : json(nullptr); }

json trap_json(const Trap& t) {
  return {{"kind", trap_json_name(t.kind)},
          {"title", t.title},
          {"advice", t.advice},
          {"kept_per_iteration_bytes", t.kept_per_iteration_bytes},
          {"kept_sites", t.kept_sites},
          {"allocated_bytes", t.allocated_bytes},
          {"reserved_bytes", t.reserved_bytes},
          {"allocated_growth_per_iteration_bytes", t.allocated_growth_per_iteration_bytes},
          {"reserved_growth_per_iteration_bytes", t.reserved_growth_per_iteration_bytes}};
}

}  // namespace

json iterations_json(const IterationReport& r, FrameResolver& resolver) {
  const EventPhases& p = r.phases;
  json out = {{"source", source_json_name(p.source)},
              {"found", iterations_found_text(p)},
              {"count", p.iterations.size()},
              {"loop", p.source == IterationSource::kPythonLoop
                           ? json{{"file", p.loop_file}, {"function", p.loop_function}, {"line", p.loop_line}}
                           : json(nullptr)},
              {"range_name", p.source == IterationSource::kNvtx ? json(p.range_name) : json(nullptr)},
              {"device", r.figures.device},
              {"growth_per_iteration_bytes", optional_signed(r.figures.allocated_growth_per_iteration_bytes)},
              {"reserved_growth_per_iteration_bytes", optional_signed(r.figures.reserved_growth_per_iteration_bytes)}};
  json list = json::array();
  for (size_t k = 0; k < p.iterations.size() && k < r.figures.iterations.size(); ++k) {
    const IterationSpan& span = p.iterations[k];
    const IterationMemory& m = r.figures.iterations[k];
    list.push_back({{"first_event", span.first_event},
                    {"end_event", span.end_event},
                    {"begin_s", seconds(span.begin_ns)},
                    {"end_s", seconds(span.end_ns)},
                    {"peak_allocated_bytes", m.peak_allocated_bytes},
                    {"peak_phase", phase_name(m.peak_phase)},
                    {"peak_event", m.peak_event},
                    {"allocated_at_end_bytes", m.allocated_at_end_bytes},
                    {"reserved_at_end_bytes", m.reserved_at_end_bytes}});
  }
  out["iterations"] = std::move(list);
  json groups = json::array();
  for (const LeakGroup& g : r.groups) {
    json sites = json::array();
    for (const GrowingSite& s : g.sites)
      sites.push_back(
          with_stack({{"kept_bytes", s.kept_bytes}, {"growth_per_iteration_bytes", s.growth_per_iteration_bytes}},
                     resolver.resolve(s.stack_id)));
    groups.push_back({{"file", g.has_python ? json(g.file) : json(nullptr)},
                      {"function", g.has_python ? json(g.function) : json(nullptr)},
                      {"line", g.has_python ? json(g.line) : json(nullptr)},
                      {"growth_per_iteration_bytes", g.growth_per_iteration_bytes},
                      {"libraries", g.libraries},
                      {"sites", std::move(sites)}});
  }
  out["growth_by_user_line"] = std::move(groups);
  json traps = json::array();
  for (const Trap& t : r.traps) traps.push_back(trap_json(t));
  out["traps"] = std::move(traps);
  return out;
}

json ooms_json(const Analysis& a, FrameResolver& resolver) {
  json out = json::array();
  for (const OomEvent& o : a.model.ooms())
    out.push_back(with_stack({{"requested_bytes", o.requested_bytes},
                              {"device", o.device},
                              {"device_free_bytes", o.device_free_bytes},
                              {"device_total_bytes", o.device_total_bytes},
                              {"time_s", seconds(o.time_ns)},
                              {"api", proto::Api_Name(o.api)},
                              {"layer", proto::Layer_Name(o.layer)},
                              {"result", o.result},
                              {"driver_attempts", o.driver_attempts}},
                             resolver.resolve(o.stack_id)));
  return out;
}

}  // namespace memtrace
