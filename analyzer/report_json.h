// The --json reports. Key names are a contract with users' scripts (see the README): top level
// `trace`, `devices`, `process`, `leaks`, `ooms`; add keys, never rename.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "frames.h"

namespace memtrace {

nlohmann::json frames_json(const std::vector<Frame>& frames);
// `site` (an object) with the stack's keys added: `frames`, and `native_frames_cut` / `python_frames_cut`
// (true where the tracer cut the stack short, see print_frames).
nlohmann::json with_stack(nlohmann::json site, const ResolvedStack& stack);
nlohmann::json trace_json(const Analysis& analysis);    // `trace`: events, truncated, health, notices
nlohmann::json devices_json(const Analysis& analysis, FrameResolver& resolver);
// `process`: host memory (pinned, registered) and address space reserved, which belong to no device.
nlohmann::json process_json(const Analysis& analysis);
// One Fragmentation; segment_count and largest_free_block_bytes are null where segments are unknown.
nlohmann::json fragmentation_json(const Fragmentation& fragmentation);
// One DEVICE_USAGE sample with the accounted comparison, or null.
nlohmann::json device_usage_json(const std::optional<DeviceUsage>& usage);
nlohmann::json leaks_json(const Analysis& analysis, FrameResolver& resolver);
nlohmann::json ooms_json(const Analysis& analysis, FrameResolver& resolver);

}  // namespace memtrace
