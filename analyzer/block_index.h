// The live PyTorch blocks sorted by address, for the walk that finds the free space inside segments
// (MemoryModel::fragmentation). Nearly every event of a PyTorch trace adds or removes a block, while
// the sorted list is asked for at a few moments (peaks, OOMs, timeline rows): so add and remove only log
// the change, and the list is brought up to date when asked for. Up to kMaxLoggedChanges changes are
// applied one by one (a binary search and a move of the tail each, cheap for one timeline row per
// event); past that the log is dropped, adds and removes cost a test, and the next request rebuilds the
// list from the live set and sorts it. Memory: the list and at most kMaxLoggedChanges log entries.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memtrace {

struct Block {
  uint64_t address = 0;
  uint64_t size_bytes = 0;
  bool operator==(const Block&) const = default;
};

class BlockIndex {
 public:
  static constexpr size_t kMaxLoggedChanges = 64;

  // A block is now live at `address` (no live block is there already).
  void add(uint64_t address, uint64_t size_bytes) { log(Change{{address, size_bytes}, true}); }
  // The live block at `address` ended.
  void remove(uint64_t address) { log(Change{{address, 0}, false}); }

  // Every live block, by address. `all_blocks(std::vector<Block>&)` must append every live block (any
  // order); it is called only when the log overflowed since the last request.
  template <typename AllBlocks>
  const std::vector<Block>& sorted(AllBlocks&& all_blocks) {
    if (stale_) {
      sorted_.clear();
      all_blocks(sorted_);
      std::sort(sorted_.begin(), sorted_.end(), [](const Block& a, const Block& b) { return a.address < b.address; });
      stale_ = false;
    } else {
      for (const Change& c : log_) apply(c);
    }
    log_.clear();
    return sorted_;
  }

 private:
  struct Change {
    Block block;
    bool add = false;
  };

  void log(const Change& c) {
    if (stale_) return;
    if (log_.size() == kMaxLoggedChanges) {
      stale_ = true;
      log_.clear();
      return;
    }
    log_.push_back(c);
  }

  void apply(const Change& c) {
    auto at = std::lower_bound(sorted_.begin(), sorted_.end(), c.block.address,
                               [](const Block& b, uint64_t address) { return b.address < address; });
    if (c.add) sorted_.insert(at, c.block);
    else if (at != sorted_.end() && at->address == c.block.address) sorted_.erase(at);
  }

  std::vector<Block> sorted_;
  std::vector<Change> log_;
  bool stale_ = false;
};

}  // namespace memtrace
