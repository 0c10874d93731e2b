// Free space inside an allocator's segments, rebuilt from addresses alone: PyTorch reports its blocks
// (address, size) and memtrace sees the driver allocations (or VMM mappings) they are carved from, so
// the gaps between live blocks are the allocator's free blocks. This is the layout that
// torch.cuda.memory_snapshot() shows, without asking PyTorch. Two ways: a walk over sorted blocks and
// segments (largest_free_block_bytes: O(blocks), for a few moments of a trace), and an index kept up
// to date block by block (BlockGapTree, SegmentFreeSpace: O(log^2 blocks) per change, for a reading
// after every event).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "model/block_index.h"

namespace memtrace {

// [start, end) in the unified virtual address space.
struct AddressRange {
  uint64_t start = 0;
  uint64_t end = 0;
};

// The largest gap between the live blocks (`blocks`: start address -> size in bytes) inside any of
// `segments`, the space before the first block and after the last one included; a segment with no
// live block is one free block of its whole size. 0 when there are no segments. Blocks outside every
// segment are ignored; overlapping blocks (a damaged trace) never make a gap negative.
uint64_t largest_free_block_bytes(const std::vector<AddressRange>& segments,
                                  const std::map<uint64_t, uint64_t>& blocks);
// The same with the blocks in a vector sorted by address (BlockIndex::sorted).
uint64_t largest_free_block_bytes(const std::vector<AddressRange>& segments, const std::vector<Block>& blocks);

// Joins mapped ranges (sorted by start, not overlapping) into segments: each run of ranges that follow
// one another without a hole and lie in the same address reservation (`reservation_of(start)`, any
// value that names it) is one segment, as PyTorch's expandable segments map pages one after another
// into one reserved range.
template <typename ReservationOf>
std::vector<AddressRange> contiguous_runs(const std::vector<AddressRange>& mapped, ReservationOf reservation_of) {
  std::vector<AddressRange> runs;
  uint64_t run_reservation = 0;
  for (const AddressRange& r : mapped) {
    uint64_t reservation = reservation_of(r.start);
    if (!runs.empty() && runs.back().end == r.start && run_reservation == reservation) {
      runs.back().end = r.end;
      continue;
    }
    runs.push_back(r);
    run_reservation = reservation;
  }
  return runs;
}

// The live PyTorch blocks by address, answering largest_free_block_bytes for one segment in
// O(log^2 blocks), with the walk's exact numbers also where blocks overlap (a damaged trace): a treap
// (random priorities: expected depth O(log blocks), whatever the addresses) where each node keeps the
// largest end of its subtree and the largest gap of its own block and right subtree given that its left
// subtree came first, so that the largest gap of a subtree for any cursor coming in is one descent.
// Insert and erase are O(log^2 blocks): each node on the path recomputes its gap with a descent.
// Memory: 48 bytes a block. No recursion.
class BlockGapTree {
 public:
  // A block [address, address + size_bytes) is now live; no live block is at `address` already.
  void insert(uint64_t address, uint64_t size_bytes);
  // The block at `address` ended; nothing happens if there is none.
  void erase(uint64_t address);
  // The largest gap between the blocks whose start lies in `segment` (start < end), as
  // largest_free_block_bytes gives for that segment alone (head and tail included).
  uint64_t largest_gap(AddressRange segment) const;
  size_t size() const { return nodes_.size() - 1 - free_.size(); }

 private:
  struct Node {
    uint64_t address = 0;
    uint64_t end = 0;      // address + size, saturated at UINT64_MAX
    uint64_t max_end = 0;  // of the subtree
    // With a left subtree: the largest gap of this block and the right subtree with the cursor at the
    // left subtree's max_end (it passes them all). 0 without one.
    uint64_t right_gap = 0;
    uint32_t left = 0, right = 0, parent = 0;  // 0: none
    uint32_t priority = 0;
  };
  uint64_t max_end(uint32_t n) const { return n ? nodes_[n].max_end : 0; }
  // The largest gap of subtree `n`'s blocks, in order, with the cursor (end of the used space) at `cursor`.
  uint64_t gap_from(uint32_t n, uint64_t cursor) const;
  void pull(uint32_t n);     // recomputes max_end and right_gap of `n` from its children
  void pull_up(uint32_t n);  // pull() on `n` and every ancestor
  void rotate_up(uint32_t n);
  void replace_child(uint32_t parent, uint32_t old_child, uint32_t new_child);
  uint32_t next_priority();

  std::vector<Node> nodes_ = std::vector<Node>(1);  // nodes_[0]: "none"
  std::vector<uint32_t> free_;                      // slots of erased nodes
  uint32_t root_ = 0;
  uint64_t random_ = 0x9E3779B97F4A7C15ull;
  mutable std::vector<uint32_t> path_;  // scratch for largest_gap
};

// Per device, the count of segments and the largest free block in them, kept up to date as blocks and
// segments come and go: what the walk (largest_free_block_bytes over a device's segments and every live
// block) gives, read in O(log segments). A block change recomputes the segments that hold its address:
// O(log^2 blocks) where segments do not overlap; where some do (only a damaged trace), every segment
// starting at or before the address is looked at (counted in work(), for the caller's budget).
class SegmentFreeSpace {
 public:
  // A segment's identity: its start and which kind of segment it is (a driver allocation, a run of
  // mappings), so that two kinds of segment at one address stay apart.
  using Key = std::pair<uint64_t, uint8_t>;

  void add_block(uint64_t address, uint64_t size_bytes);
  void remove_block(uint64_t address);
  // `key` is not a segment already. A segment whose end is not after its start (an address range that
  // wraps) is counted and holds no free block, as in the walk.
  void add_segment(Key key, AddressRange range, int32_t device);
  void remove_segment(Key key);  // nothing happens if `key` is no segment

  uint64_t segment_count(int32_t device) const;
  uint64_t largest_free_block_bytes(int32_t device) const;
  // Every segment of one kind, (key, range, device), by key.
  struct Segment {
    Key key;
    AddressRange range;
    int32_t device = -1;
    bool operator==(const Segment& o) const {
      return key == o.key && range.start == o.range.start && range.end == o.range.end && device == o.device;
    }
  };
  std::vector<Segment> segments_of_kind(uint8_t kind) const;
  // Segments looked at so far.
  uint64_t work() const { return work_; }

 private:
  struct Entry {
    uint64_t end = 0;
    int32_t device = -1;
    uint64_t gap_bytes = 0;  // its largest free block
  };
  struct DeviceSegments {
    uint64_t count = 0;
    std::map<uint64_t, uint64_t> gap_counts;  // largest free block of a segment -> how many segments
  };
  void update_gap(Entry& e, uint64_t start);
  // After a block at `address` came or went: the largest free block of each segment that holds it.
  void update_segments_holding(uint64_t address);
  void count_overlap(std::map<Key, Entry>::const_iterator first, std::map<Key, Entry>::const_iterator second, int sign);

  BlockGapTree blocks_;
  std::map<Key, Entry> segments_;        // end > start
  std::map<Key, Entry> empty_segments_;  // end <= start: no block can lie in them
  std::map<int32_t, DeviceSegments> devices_;
  // Neighbours in segments_ (by key) that overlap. Segments overlap somewhere iff some neighbours do.
  uint64_t overlapping_neighbours_ = 0;
  uint64_t work_ = 0;
};

// The expandable segments (PyTorch's: pages mapped one after another into one address reservation)
// kept up to date page by page in a SegmentFreeSpace, as MemoryModel's walk rebuilds them from every
// mapping: the mapped pages of device memory of one device that follow one another without a hole form
// a run; a run that held a PyTorch block anywhere gives one segment per stretch of it whose pages start
// in the same reservation. A map joins a page to its neighbours' runs and an unmap splits its run:
// O(log pages), and O(stretches) more where a run that spans reservations starts or stops holding
// blocks. Pages that overlap, are empty or wrap past 2^64 (only in a damaged trace) make the runs
// ambiguous: while any does, exact() is false, the segments in the SegmentFreeSpace are left to the
// caller (the walk), and the first exact() after the last one goes rebuilds them from every page.
class MappedRuns {
 public:
  // Segments go into the `space` each call is given (always the same one) with keys {start, kind}.
  explicit MappedRuns(uint8_t kind) : kind_(kind) {}
  // A page [start, start + size_bytes) of `device`'s memory whose start lies in `reservation` (any value
  // naming it, 0 for none), `held`: a block has been placed in it. No page is at `start` already.
  void add(SegmentFreeSpace& space, uint64_t start, uint64_t size_bytes, int32_t device, uint64_t reservation,
           bool held);
  void remove(SegmentFreeSpace& space, uint64_t start);     // nothing happens if no page is at `start`
  void mark_held(SegmentFreeSpace& space, uint64_t start);  // a block has been placed in the page at `start`
  bool contains(uint64_t start) const { return pages_.count(start) > 0; }
  // Whether the segments in the space are the runs' (no overlapping, empty or wrapping page); rebuilds
  // them first where the last such page has gone since.
  bool exact(SegmentFreeSpace& space);
  // Runs and pages looked at so far (for a caller's work budget).
  uint64_t work() const { return work_; }

 private:
  struct Page {
    uint64_t end = 0;  // start + size, wrapped as the walk does
    int32_t device = -1;
    uint64_t reservation = 0;
    bool held = false;
  };
  // A run of pages joined in one reservation: [start, end).
  struct Stretch {
    uint64_t end = 0;
    int32_t device = -1;
    uint64_t reservation = 0;
    bool segment = false;  // its run held a block: it is in space_
  };
  using PageIt = std::map<uint64_t, Page>::iterator;
  static bool bad(uint64_t start, const Page& p) { return p.end <= start; }
  static uint64_t bounded_end(uint64_t start, const Page& p) { return p.end < start ? UINT64_MAX : p.end; }
  void count_anomalies(PageIt first, PageIt second, int sign);
  static bool joined(PageIt a, PageIt b) { return a->second.end == b->first && a->second.device == b->second.device; }
  bool any_held(uint64_t start, uint64_t end) const;
  // The stretch holding address `at` (its start at or before it).
  std::map<uint64_t, Stretch>::iterator stretch_at(uint64_t at) { return std::prev(stretches_.upper_bound(at)); }
  std::map<uint64_t, uint64_t>::iterator run_at(uint64_t at) { return std::prev(runs_.upper_bound(at)); }
  void set_segment(uint64_t start, Stretch& s, bool segment);
  void put_stretch(uint64_t start, Stretch s);
  void erase_stretch(std::map<uint64_t, Stretch>::iterator it);
  // Every stretch in [start, end) but `except` becomes a segment or stops being one.
  void set_segments(uint64_t start, uint64_t end, bool segment);
  // A page's neighbours in pages_ (pages_.end() where none) and whether it joins each into one run.
  struct Neighbours {
    PageIt prev, next;
    bool left = false, right = false;
  };
  Neighbours neighbours(PageIt page);
  void link(PageIt page);
  void unlink(PageIt page);
  void rebuild();

  SegmentFreeSpace* space_ = nullptr;  // the space of the current call
  uint8_t kind_;
  std::map<uint64_t, Page> pages_;
  std::set<uint64_t> held_;                // starts of the pages that held a block
  std::map<uint64_t, Stretch> stretches_;  // by start; valid while exact_
  std::map<uint64_t, uint64_t> runs_;      // start -> end; valid while exact_
  uint64_t anomalies_ = 0;                 // bad pages, and neighbours in pages_ that overlap
  bool exact_ = true;
  uint64_t work_ = 0;
};

}  // namespace memtrace
