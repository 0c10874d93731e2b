#include "model/segment_map.h"

#include <algorithm>

namespace memtrace {
namespace {

// `first_in(start)` is the first block at or after `start`; `end` is past the last block; `address_of`
// and `size_of` read a block.
template <typename FirstIn, typename Iterator, typename AddressOf, typename SizeOf>
uint64_t largest_gap(const std::vector<AddressRange>& segments, FirstIn first_in, Iterator end, AddressOf address_of,
                     SizeOf size_of) {
  uint64_t largest = 0;
  for (const AddressRange& segment : segments) {
    uint64_t cursor = segment.start;  // end of the used space so far
    for (Iterator b = first_in(segment.start); b != end && address_of(*b) < segment.end; ++b) {
      uint64_t address = address_of(*b);
      if (address > cursor) largest = std::max(largest, address - cursor);
      uint64_t block_end = address + std::min(size_of(*b), segment.end - address);
      cursor = std::max(cursor, block_end);
    }
    if (segment.end > cursor) largest = std::max(largest, segment.end - cursor);
  }
  return largest;
}

}  // namespace

uint64_t largest_free_block_bytes(const std::vector<AddressRange>& segments,
                                  const std::map<uint64_t, uint64_t>& blocks) {
  using Entry = std::pair<const uint64_t, uint64_t>;
  return largest_gap(
      segments, [&](uint64_t start) { return blocks.lower_bound(start); }, blocks.end(),
      [](const Entry& b) { return b.first; }, [](const Entry& b) { return b.second; });
}

uint64_t largest_free_block_bytes(const std::vector<AddressRange>& segments, const std::vector<Block>& blocks) {
  auto first_in = [&](uint64_t start) {
    return std::lower_bound(blocks.begin(), blocks.end(), start,
                            [](const Block& b, uint64_t address) { return b.address < address; });
  };
  return largest_gap(
      segments, first_in, blocks.end(), [](const Block& b) { return b.address; },
      [](const Block& b) { return b.size_bytes; });
}

}  // namespace memtrace

namespace memtrace {

uint32_t BlockGapTree::next_priority() {
  // xorshift64: the priorities only have to be independent of the addresses.
  random_ ^= random_ << 13;
  random_ ^= random_ >> 7;
  random_ ^= random_ << 17;
  return uint32_t(random_ >> 32);
}

uint64_t BlockGapTree::gap_from(uint32_t n, uint64_t cursor) const {
  uint64_t largest = 0;
  while (n) {
    const Node& node = nodes_[n];
    if (cursor >= max_end(node.left)) {
      // The left subtree's blocks all end at or before the cursor: no gap before any of them, and the
      // cursor stays.
      if (node.address > cursor) largest = std::max(largest, node.address - cursor);
      cursor = std::max(cursor, node.end);
      n = node.right;
    } else {
      // After the left subtree the cursor is its max_end whatever it was: right_gap covers the rest.
      largest = std::max(largest, node.right_gap);
      n = node.left;
    }
  }
  return largest;
}

void BlockGapTree::pull(uint32_t n) {
  Node& node = nodes_[n];
  node.max_end = std::max({node.end, max_end(node.left), max_end(node.right)});
  node.right_gap = 0;
  if (!node.left) return;
  uint64_t cursor = nodes_[node.left].max_end;
  uint64_t own = node.address > cursor ? node.address - cursor : 0;
  node.right_gap = std::max(own, gap_from(node.right, std::max(cursor, node.end)));
}

void BlockGapTree::pull_up(uint32_t n) {
  for (; n; n = nodes_[n].parent) pull(n);
}

void BlockGapTree::replace_child(uint32_t parent, uint32_t old_child, uint32_t new_child) {
  if (new_child) nodes_[new_child].parent = parent;
  if (!parent) root_ = new_child;
  else if (nodes_[parent].left == old_child) nodes_[parent].left = new_child;
  else nodes_[parent].right = new_child;
}

// Moves `n` above its parent, keeping the order; recomputes both.
void BlockGapTree::rotate_up(uint32_t n) {
  uint32_t p = nodes_[n].parent;
  uint32_t g = nodes_[p].parent;
  if (nodes_[p].left == n) {
    nodes_[p].left = nodes_[n].right;
    if (nodes_[n].right) nodes_[nodes_[n].right].parent = p;
    nodes_[n].right = p;
  } else {
    nodes_[p].right = nodes_[n].left;
    if (nodes_[n].left) nodes_[nodes_[n].left].parent = p;
    nodes_[n].left = p;
  }
  nodes_[p].parent = n;
  replace_child(g, p, n);
  pull(p);
  pull(n);
}

void BlockGapTree::insert(uint64_t address, uint64_t size_bytes) {
  uint32_t n;
  if (!free_.empty()) {
    n = free_.back();
    free_.pop_back();
  } else {
    n = uint32_t(nodes_.size());
    nodes_.emplace_back();
  }
  uint64_t end = address + std::min(size_bytes, UINT64_MAX - address);
  nodes_[n] = Node{.address = address, .end = end, .max_end = end, .priority = next_priority()};
  uint32_t parent = 0;
  for (uint32_t at = root_; at;) {
    parent = at;
    at = address < nodes_[at].address ? nodes_[at].left : nodes_[at].right;
  }
  nodes_[n].parent = parent;
  if (!parent) root_ = n;
  else if (address < nodes_[parent].address) nodes_[parent].left = n;
  else nodes_[parent].right = n;
  while (nodes_[n].parent && nodes_[nodes_[n].parent].priority < nodes_[n].priority) rotate_up(n);
  pull_up(n);
}

void BlockGapTree::erase(uint64_t address) {
  uint32_t n = root_;
  while (n && nodes_[n].address != address) n = address < nodes_[n].address ? nodes_[n].left : nodes_[n].right;
  if (!n) return;
  // Down until it has at most one child, by raising the child of higher priority.
  while (nodes_[n].left && nodes_[n].right) {
    uint32_t l = nodes_[n].left, r = nodes_[n].right;
    rotate_up(nodes_[l].priority > nodes_[r].priority ? l : r);
  }
  uint32_t parent = nodes_[n].parent;
  replace_child(parent, n, nodes_[n].left ? nodes_[n].left : nodes_[n].right);
  pull_up(parent);
  free_.push_back(n);
}

uint64_t BlockGapTree::largest_gap(AddressRange segment) const {
  uint64_t largest = 0;
  uint64_t cursor = segment.start;
  auto block = [&](const Node& b) {
    if (b.address > cursor) largest = std::max(largest, b.address - cursor);
    cursor = std::max(cursor, b.end);
  };
  auto subtree = [&](uint32_t s) {
    largest = std::max(largest, gap_from(s, cursor));
    cursor = std::max(cursor, max_end(s));
  };
  auto inside = [&](uint32_t s) { return nodes_[s].address >= segment.start && nodes_[s].address < segment.end; };
  // The highest node inside the segment: every other block inside is in its subtrees.
  uint32_t top = root_;
  while (top && !inside(top)) top = nodes_[top].address >= segment.end ? nodes_[top].left : nodes_[top].right;
  if (top) {
    // Its left subtree: the nodes inside along the path to the segment's start, each followed by its
    // right subtree, deepest first.
    path_.clear();
    for (uint32_t s = nodes_[top].left; s;) {
      if (nodes_[s].address >= segment.start) {
        path_.push_back(s);
        s = nodes_[s].left;
      } else {
        s = nodes_[s].right;
      }
    }
    for (size_t i = path_.size(); i-- > 0;) {
      block(nodes_[path_[i]]);
      subtree(nodes_[path_[i]].right);
    }
    block(nodes_[top]);
    // Its right subtree: along the path to the segment's end, each node inside after its left subtree.
    for (uint32_t s = nodes_[top].right; s;) {
      if (nodes_[s].address < segment.end) {
        subtree(nodes_[s].left);
        block(nodes_[s]);
        s = nodes_[s].right;
      } else {
        s = nodes_[s].left;
      }
    }
  }
  if (segment.end > cursor) largest = std::max(largest, segment.end - cursor);
  return largest;
}

void SegmentFreeSpace::update_gap(Entry& e, uint64_t start) {
  uint64_t gap = blocks_.largest_gap(AddressRange{start, e.end});
  if (gap == e.gap_bytes) return;
  auto& counts = devices_[e.device].gap_counts;
  if (auto it = counts.find(e.gap_bytes); it != counts.end() && --it->second == 0) counts.erase(it);
  ++counts[gap];
  e.gap_bytes = gap;
}

void SegmentFreeSpace::add_block(uint64_t address, uint64_t size_bytes) {
  blocks_.insert(address, size_bytes);
  update_segments_holding(address);
}

void SegmentFreeSpace::remove_block(uint64_t address) {
  blocks_.erase(address);
  update_segments_holding(address);
}

void SegmentFreeSpace::update_segments_holding(uint64_t address) {
  auto after = segments_.upper_bound(Key{address, UINT8_MAX});
  // Without overlaps only the last segment starting at or before the address can hold it.
  for (auto it = after; it != segments_.begin();) {
    --it;
    ++work_;
    if (address < it->second.end) update_gap(it->second, it->first.first);
    if (overlapping_neighbours_ == 0) break;
  }
}

void SegmentFreeSpace::count_overlap(std::map<Key, Entry>::const_iterator first,
                                     std::map<Key, Entry>::const_iterator second, int sign) {
  if (first == segments_.end() || second == segments_.end()) return;
  if (first->second.end > second->first.first) overlapping_neighbours_ += uint64_t(int64_t(sign));
}

void SegmentFreeSpace::add_segment(Key key, AddressRange range, int32_t device) {
  ++work_;
  DeviceSegments& d = devices_[device];
  ++d.count;
  if (range.end <= range.start) {
    empty_segments_[key] = Entry{range.end, device, 0};
    ++d.gap_counts[0];
    return;
  }
  auto [it, inserted] = segments_.emplace(key, Entry{range.end, device, 0});
  ++d.gap_counts[0];
  auto next = std::next(it);
  auto prev = it == segments_.begin() ? segments_.end() : std::prev(it);
  count_overlap(prev, next, -1);
  count_overlap(prev, it, +1);
  count_overlap(it, next, +1);
  update_gap(it->second, key.first);
}

void SegmentFreeSpace::remove_segment(Key key) {
  auto erase_entry = [this](const Entry& e) {
    DeviceSegments& d = devices_[e.device];
    --d.count;
    if (auto it = d.gap_counts.find(e.gap_bytes); it != d.gap_counts.end() && --it->second == 0) d.gap_counts.erase(it);
  };
  if (auto it = empty_segments_.find(key); it != empty_segments_.end()) {
    erase_entry(it->second);
    empty_segments_.erase(it);
    return;
  }
  auto it = segments_.find(key);
  if (it == segments_.end()) return;
  erase_entry(it->second);
  auto next = std::next(it);
  auto prev = it == segments_.begin() ? segments_.end() : std::prev(it);
  count_overlap(prev, it, -1);
  count_overlap(it, next, -1);
  count_overlap(prev, next, +1);
  segments_.erase(it);
}

uint64_t SegmentFreeSpace::segment_count(int32_t device) const {
  auto it = devices_.find(device);
  return it == devices_.end() ? 0 : it->second.count;
}

uint64_t SegmentFreeSpace::largest_free_block_bytes(int32_t device) const {
  auto it = devices_.find(device);
  return it == devices_.end() || it->second.gap_counts.empty() ? 0 : it->second.gap_counts.rbegin()->first;
}

std::vector<SegmentFreeSpace::Segment> SegmentFreeSpace::segments_of_kind(uint8_t kind) const {
  std::vector<Segment> out;
  for (const auto* map : {&segments_, &empty_segments_})
    for (const auto& [key, e] : *map)
      if (key.second == kind) out.push_back(Segment{key, AddressRange{key.first, e.end}, e.device});
  std::sort(out.begin(), out.end(), [](const Segment& a, const Segment& b) { return a.key < b.key; });
  return out;
}

void MappedRuns::count_anomalies(PageIt first, PageIt second, int sign) {
  if (first == pages_.end() || second == pages_.end()) return;
  if (bounded_end(first->first, first->second) > second->first) anomalies_ += uint64_t(int64_t(sign));
}

bool MappedRuns::any_held(uint64_t start, uint64_t end) const {
  auto h = held_.lower_bound(start);
  return h != held_.end() && *h < end;
}

void MappedRuns::set_segment(uint64_t start, Stretch& s, bool segment) {
  ++work_;
  if (s.segment == segment) return;
  s.segment = segment;
  if (segment) space_->add_segment({start, kind_}, {start, s.end}, s.device);
  else space_->remove_segment({start, kind_});
}

void MappedRuns::put_stretch(uint64_t start, Stretch s) {
  ++work_;
  stretches_[start] = s;
  if (s.segment) space_->add_segment({start, kind_}, {start, s.end}, s.device);
}

void MappedRuns::erase_stretch(std::map<uint64_t, Stretch>::iterator it) {
  ++work_;
  if (it->second.segment) space_->remove_segment({it->first, kind_});
  stretches_.erase(it);
}

void MappedRuns::set_segments(uint64_t start, uint64_t end, bool segment) {
  for (auto s = stretches_.lower_bound(start); s != stretches_.end() && s->first < end; ++s)
    set_segment(s->first, s->second, segment);
}

void MappedRuns::add(SegmentFreeSpace& space, uint64_t start, uint64_t size_bytes, int32_t device, uint64_t reservation,
                     bool held) {
  space_ = &space;
  auto [it, inserted] = pages_.emplace(start, Page{start + size_bytes, device, reservation, held});
  if (!inserted) return;
  ++work_;
  if (held) held_.insert(start);
  auto next = std::next(it);
  auto prev = it == pages_.begin() ? pages_.end() : std::prev(it);
  count_anomalies(prev, next, -1);
  count_anomalies(prev, it, +1);
  count_anomalies(it, next, +1);
  if (bad(start, it->second)) ++anomalies_;
  if (anomalies_ > 0) exact_ = false;
  if (exact_) link(it);
}

void MappedRuns::remove(SegmentFreeSpace& space, uint64_t start) {
  space_ = &space;
  auto it = pages_.find(start);
  if (it == pages_.end()) return;
  ++work_;
  if (exact_) unlink(it);  // exact_: no anomaly, so the runs hold this page
  auto next = std::next(it);
  auto prev = it == pages_.begin() ? pages_.end() : std::prev(it);
  count_anomalies(prev, it, -1);
  count_anomalies(it, next, -1);
  count_anomalies(prev, next, +1);
  if (bad(start, it->second)) --anomalies_;
  held_.erase(start);
  pages_.erase(it);
}

void MappedRuns::mark_held(SegmentFreeSpace& space, uint64_t start) {
  space_ = &space;
  auto it = pages_.find(start);
  if (it == pages_.end() || it->second.held) return;
  it->second.held = true;
  if (exact_) {
    auto run = run_at(start);
    if (!any_held(run->first, run->second)) set_segments(run->first, run->second, true);
  }
  held_.insert(start);
}

MappedRuns::Neighbours MappedRuns::neighbours(PageIt page) {
  Neighbours n{page == pages_.begin() ? pages_.end() : std::prev(page), std::next(page)};
  n.left = n.prev != pages_.end() && joined(n.prev, page);
  n.right = n.next != pages_.end() && joined(page, n.next);
  return n;
}

void MappedRuns::link(PageIt page) {
  uint64_t start = page->first;
  const Page& p = page->second;
  auto [prev, next, left, right] = neighbours(page);
  // The run: the neighbours' runs joined through this page.
  uint64_t run_start = start, run_end = p.end;
  bool left_held = false, right_held = false;
  if (left) {
    auto run = run_at(prev->first);
    run_start = run->first;
    left_held = any_held(run->first, run->second);
    runs_.erase(run);
  }
  if (right) {
    auto run = runs_.find(next->first);
    run_end = run->second;
    right_held = any_held(run->first, run->second);
    runs_.erase(run);
  }
  runs_[run_start] = run_end;
  bool held = left_held || right_held || p.held;
  if (left && held && !left_held) set_segments(run_start, start, true);
  if (right && held && !right_held) set_segments(p.end, run_end, true);
  // The stretch: the neighbours' stretches joined through this page where they are in its reservation.
  uint64_t stretch_start = start, stretch_end = p.end;
  if (left && prev->second.reservation == p.reservation) {
    auto s = stretch_at(prev->first);
    stretch_start = s->first;
    erase_stretch(s);
  }
  if (right && next->second.reservation == p.reservation) {
    auto s = stretches_.find(next->first);
    stretch_end = s->second.end;
    erase_stretch(s);
  }
  put_stretch(stretch_start, Stretch{stretch_end, p.device, p.reservation, held});
}

void MappedRuns::unlink(PageIt page) {
  uint64_t start = page->first;
  const Page& p = page->second;
  auto [prev, next, left, right] = neighbours(page);
  auto run = run_at(start);
  uint64_t run_start = run->first, run_end = run->second;
  runs_.erase(run);
  bool held = any_held(run_start, run_end);
  bool left_held = left && any_held(run_start, start);
  bool right_held = right && any_held(p.end, run_end);
  if (left) runs_[run_start] = start;
  if (right) runs_[p.end] = run_end;
  auto s = stretch_at(start);
  uint64_t stretch_start = s->first;
  Stretch stretch = s->second;
  erase_stretch(s);
  if (stretch_start < start) put_stretch(stretch_start, Stretch{start, stretch.device, stretch.reservation, left_held});
  if (p.end < stretch.end) put_stretch(p.end, Stretch{stretch.end, stretch.device, stretch.reservation, right_held});
  if (left && held && !left_held) set_segments(run_start, start, false);
  if (right && held && !right_held) set_segments(p.end, run_end, false);
}

void MappedRuns::rebuild() {
  for (const SegmentFreeSpace::Segment& s : space_->segments_of_kind(kind_)) {
    ++work_;
    space_->remove_segment(s.key);
  }
  stretches_.clear();
  runs_.clear();
  // Runs first (whether each held a block), then the stretches, each a segment where its run held one.
  std::set<uint64_t> held_runs;
  auto prev = pages_.end();
  for (auto page = pages_.begin(); page != pages_.end(); prev = page++) {
    ++work_;
    if (prev != pages_.end() && joined(prev, page)) {
      runs_.rbegin()->second = page->second.end;
    } else {
      runs_[page->first] = page->second.end;
    }
    if (page->second.held) held_runs.insert(runs_.rbegin()->first);
  }
  prev = pages_.end();
  uint64_t stretch_start = 0;
  for (auto page = pages_.begin(); page != pages_.end(); prev = page++) {
    const Page& p = page->second;
    if (prev != pages_.end() && joined(prev, page) && prev->second.reservation == p.reservation) {
      stretches_[stretch_start].end = p.end;
      continue;
    }
    stretch_start = page->first;
    stretches_[stretch_start] =
        Stretch{p.end, p.device, p.reservation, held_runs.count(run_at(stretch_start)->first) > 0};
  }
  for (const auto& [start, s] : stretches_)
    if (s.segment) space_->add_segment({start, kind_}, {start, s.end}, s.device);
}

bool MappedRuns::exact(SegmentFreeSpace& space) {
  space_ = &space;
  if (exact_) return true;
  if (anomalies_ > 0) return false;
  rebuild();
  exact_ = true;
  return true;
}

}  // namespace memtrace
