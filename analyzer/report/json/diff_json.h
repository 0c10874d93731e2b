// The --json document of `memtrace diff BEFORE AFTER` (analysis/diff.h); its keys are in docs/json.md and
// docs/schema/memtrace.schema.json ($defs/diff): add keys, never rename.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/diff.h"
#include "stacks/frames.h"

namespace memtrace {

// `before` and `after` (trace_json of each, with its symbolizer's health), what the traces ran, the devices
// and every call site of either trace (moved most first) with its frames: from AFTER where the site is there,
// else from BEFORE.
nlohmann::json diff_json(const Analysis& before, FrameResolver& before_frames, const Symbolizer& before_symbolizer,
                         const Analysis& after, FrameResolver& after_frames, const Symbolizer& after_symbolizer,
                         const DiffResult& diff);

}  // namespace memtrace
