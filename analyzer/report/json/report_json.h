// The --json reports. Key names are a contract with users' scripts (see the README): top level
// `trace`, `devices`, `process`, `leaks`, `ooms`; add keys, never rename.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/iteration_report.h"
#include "stacks/frames.h"

namespace memtrace {

nlohmann::json frames_json(const std::vector<Frame>& frames);
// `site` (an object) with the stack's keys added: `frames`, and `native_frames_cut` / `python_frames_cut`
// (true where the tracer cut the stack short, see print_frames), and `python_frames_from_backward` only when true
// (the Python frames are those of the thread waiting in backward).
nlohmann::json with_stack(nlohmann::json site, const ResolvedStack& stack);
// `fields` (an object) with a call site's stack (with_stack of CallSite::stack_id: of the stacks merged into the
// site, the one with the most bytes) and, only where the site merges stacks that differ in the interpreter's
// frames alone (call_sites.h, SiteGrouping), `merged_stack_count`: how many. Absent for a site of one stack, so
// that reports where nothing merges read as before.
nlohmann::json with_site_stack(nlohmann::json fields, const CallSite& site, FrameResolver& resolver);
nlohmann::json trace_json(const Analysis& analysis);  // `trace`: events, truncated, health, notices
// Adds to `trace` (trace_json's) what the symbolizer counted (`modules_not_opened`, only where not zero): call it
// once the report's frames are resolved.
void add_symbolizer_health(nlohmann::json& trace, const Symbolizer& symbolizer);
nlohmann::json devices_json(const Analysis& analysis, FrameResolver& resolver);
// `process`: host memory (pinned, registered) and address space reserved, which belong to no device.
nlohmann::json process_json(const Analysis& analysis);
// One Fragmentation; segment_count and largest_free_block_bytes are null where segments are unknown.
nlohmann::json fragmentation_json(const Fragmentation& fragmentation);
// One DEVICE_USAGE sample with the accounted comparison, or null.
nlohmann::json device_usage_json(const std::optional<DeviceUsage>& usage);
// With `iterations` where iterations were found, each entry also has `growth_per_iteration_bytes`.
nlohmann::json leaks_json(const Analysis& analysis, FrameResolver& resolver,
                          const IterationReport* iterations = nullptr);
// `iterations` (summary and leaks): how the iterations were found, each one's figures, the growth per iteration,
// the growing sites by the user's line and the traps (docs/json.md).
nlohmann::json iterations_json(const IterationReport& iterations, FrameResolver& resolver);
nlohmann::json ooms_json(const Analysis& analysis, FrameResolver& resolver);

}  // namespace memtrace
