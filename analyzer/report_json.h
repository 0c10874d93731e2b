// The --json reports. Key names are a contract with users' scripts (see the README): top level
// `trace`, `devices`, `leaks`, `ooms`; add keys, never rename.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis.h"
#include "frames.h"

namespace memtrace {

nlohmann::json frames_json(const std::vector<Frame>& frames);
nlohmann::json trace_json(const Analysis& analysis);    // `trace`: events, truncated, health, notices
nlohmann::json devices_json(const Analysis& analysis, FrameResolver& resolver);
nlohmann::json leaks_json(const Analysis& analysis, FrameResolver& resolver);
nlohmann::json ooms_json(const Analysis& analysis, FrameResolver& resolver);

}  // namespace memtrace
