#include "analysis/live_tree.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "stacks/frame_roles.h"

namespace memtrace {

const Frame* user_line_frame(const ResolvedStack& stack) {
  for (const Frame& f : stack.frames)
    if (is_user_frame(f)) return &f;
  return nullptr;
}

std::vector<UserLineNode> live_tree(const std::vector<LiveAtMoment>& live, FrameResolver& resolver,
                                    const SiteGrouping& grouping) {
  std::vector<LiveAllocation> allocations;
  allocations.reserve(live.size());
  for (const LiveAtMoment& l : live) allocations.push_back(l.allocation);
  std::vector<CallSite> sites = group_by_call_site(allocations, grouping);  // largest first
  // (has a user frame, file, line, function) -> node: the key of the group without one is all empty.
  using Key = std::tuple<bool, std::string, uint32_t, std::string>;
  std::map<Key, size_t> index;
  std::vector<UserLineNode> nodes;
  for (const CallSite& site : sites) {
    ResolvedStack stack = resolver.resolve(site.stack_id);
    const Frame* user = user_line_frame(stack);
    Key key = user ? Key{true, user->file, user->line, user->function} : Key{};
    auto [it, inserted] = index.try_emplace(key, nodes.size());
    if (inserted) {
      nodes.emplace_back();
      if (user) nodes.back().user_frame = *user;
    }
    UserLineNode& node = nodes[it->second];
    node.bytes = saturating_add(node.bytes, site.bytes);
    node.count = saturating_add(node.count, site.count);
    node.sites.push_back(site);
  }
  // Nodes were made in the order of their largest site: a stable sort by bytes keeps that for ties.
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const UserLineNode& a, const UserLineNode& b) { return a.bytes > b.bytes; });
  return nodes;
}

}  // namespace memtrace
