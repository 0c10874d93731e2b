// What was live at a moment as a tree by user line, for `memtrace peak`: the live allocations grouped under the
// user's line (below), then under their call site (call_sites.h), with bytes and counts at each level.
//
// The user's line of a stack is the frame of the user's own code (frame_roles.h, is_user_frame) nearest the
// allocation: the outer end of the library and native frames below it, the line of the script that called into
// PyTorch (`out = model(x)`). Not the outermost user frame of the whole stack: in a script that is the same
// `<module>` or `main()` line for every allocation, a tree of one node.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/peak_breakdown.h"
#include "stacks/call_sites.h"
#include "stacks/frames.h"

namespace memtrace {

struct UserLineNode {
  // The user's line (a Python frame) the allocations share; nullopt for stacks with no user frame (C++ programs,
  // PyTorch's autograd worker thread, library-only stacks).
  std::optional<Frame> user_frame;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::vector<CallSite> sites;  // largest first (group_by_call_site's order)
};

// Groups `live` (one moment's allocations, MomentBreakdown::live) by user line, then by call site: user lines
// largest first (ties: the one whose largest site comes first), the group without a user frame among them by
// its bytes. Frames are matched by file, line and function.
std::vector<UserLineNode> live_tree(const std::vector<LiveAtMoment>& live, FrameResolver& resolver,
                                    const SiteGrouping& grouping);

// The user's line of `stack` (its first frame of the user's own code: frames are innermost first), or nullptr.
const Frame* user_line_frame(const ResolvedStack& stack);

}  // namespace memtrace
