// `memtrace oom --json`. Key names are a contract with users' scripts (documented in the README's
// `oom` section): add keys, never rename.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/oom_report.h"
#include "stacks/frames.h"

namespace memtrace {

// {"trace": ..., "oom_count", "detailed_count", "ooms": [...]}
nlohmann::json oom_report_json(const Analysis& analysis, const OomReport& report, FrameResolver& resolver);

}  // namespace memtrace
