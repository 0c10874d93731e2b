// The --json form of the peak breakdown (analysis/peak_breakdown.h) and of `memtrace peak`'s tree by user line
// (analysis/live_tree.h). Keys as docs/json.md lists them; add keys, never rename.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "analysis/live_tree.h"
#include "analysis/peak_breakdown.h"
#include "stacks/frames.h"

namespace memtrace {

// `breakdown`: the phases' source, the moment's iteration and phase, each row's bytes and count, the activations
// kept across iterations, the cache, the memory outside PyTorch's allocator by layer, the context, and the trap.
nlohmann::json breakdown_json(const MomentBreakdown& breakdown);

// One entry of `memtrace peak --json`'s `peaks`: the device, the moment, its totals, `breakdown` and `user_lines`
// (the tree: every user line, each with every call site and its frames).
nlohmann::json peak_json(const MomentBreakdown& breakdown, bool at_time, const std::vector<UserLineNode>& tree,
                         FrameResolver& resolver);

}  // namespace memtrace
