// The live PyTorch blocks sorted by address, for the walk that finds the free space inside segments
// (MemoryModel::fragmentation). Nearly every event of a PyTorch trace adds or removes a block, while
// the sorted list is asked for at a few moments (peaks, OOMs, timeline rows): so add and remove only log
// the change, and the list is brought up to date when asked for, by one merge of the log's net effect
// (the last change of each address, sorted) into the list: O(blocks + changes x log changes). The log
// holds up to as many changes as the list has blocks (at least kMinLoggedChanges); past that it is
// dropped, adds and removes cost a test, and the next request rebuilds the list from the live set and
// sorts it. Memory: the list and a log no longer than it. The log's array is sized to its limit whenever
// the list is brought up to date, so that a change is logged with a store and a count, never a call to
// grow it: the memory model's fast path logs a block on nearly every event and makes no call.
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
  static constexpr size_t kMinLoggedChanges = 64;

  // A block is now live at `address` (no live block is there already). Once the log has overflowed
  // (most of the time on a long trace), one test.
  void add(uint64_t address, uint64_t size_bytes) {
    if (!stale_) log(Change{{address, size_bytes}, true});
  }
  // The live block at `address` ended. Neither makes a call.
  void remove(uint64_t address) {
    if (!stale_) log(Change{{address, 0}, false});
  }

  // Every live block, by address. `all_blocks(std::vector<Block>&)` must append every live block (any
  // order); it is called only when the log overflowed since the last request.
  template <typename AllBlocks>
  const std::vector<Block>& sorted(AllBlocks&& all_blocks) {
    if (stale_) {
      sorted_.clear();
      all_blocks(sorted_);
      sort_mostly_ascending();
      stale_ = false;
    } else if (logged_ > 0) {
      merge_log();
    }
    logged_ = 0;
    log_limit_ = std::max(kMinLoggedChanges, sorted_.size());  // until the next request
    log_.resize(log_limit_);
    return sorted_;
  }

 private:
  struct Change {
    Block block;
    bool add = false;
  };

  void log(const Change& c) {
    if (logged_ == log_limit_) {
      stale_ = true;
      logged_ = 0;
      return;
    }
    log_[logged_++] = c;
  }

  // Sorts sorted_ by address. The live set comes in the model's pool order, which is mostly allocation
  // order: the long-lived blocks a program makes first usually rise with their addresses, and the
  // churn reuses a few slots. So the blocks that continue the ascending run so far stay in place, the
  // others are set aside, sorted and merged back from the end: O(n) plus the sort of those set aside.
  // Live blocks have distinct addresses, so the order is the one a full sort gives.
  void sort_mostly_ascending() {
    std::vector<Block>& aside = merged_;  // scratch
    aside.clear();
    size_t kept = 0;
    for (const Block& b : sorted_) {
      if (kept == 0 || b.address > sorted_[kept - 1].address) sorted_[kept++] = b;
      else aside.push_back(b);
    }
    if (aside.empty()) return;
    std::sort(aside.begin(), aside.end(), [](const Block& a, const Block& b) { return a.address < b.address; });
    size_t out = sorted_.size();  // kept + aside.size()
    for (size_t left = kept, right = aside.size(); right > 0;) {
      if (left > 0 && sorted_[left - 1].address > aside[right - 1].address) sorted_[--out] = sorted_[--left];
      else sorted_[--out] = aside[--right];
    }
  }

  void merge_log() {
    // The net effect: the last change of each address. A stable sort keeps each address's changes in
    // the order they came.
    auto logged_end = log_.begin() + std::ptrdiff_t(logged_);
    std::stable_sort(log_.begin(), logged_end,
                     [](const Change& a, const Change& b) { return a.block.address < b.block.address; });
    merged_.clear();
    auto old = sorted_.begin();
    for (size_t i = 0; i < logged_; ++i) {
      if (i + 1 < logged_ && log_[i + 1].block.address == log_[i].block.address) continue;
      const Change& last = log_[i];
      while (old != sorted_.end() && old->address < last.block.address) merged_.push_back(*old++);
      if (old != sorted_.end() && old->address == last.block.address) ++old;  // replaced or removed
      if (last.add) merged_.push_back(last.block);
    }
    merged_.insert(merged_.end(), old, sorted_.end());
    sorted_.swap(merged_);
  }

  std::vector<Block> sorted_;
  std::vector<Block> merged_;  // scratch for merge_log, kept for its capacity
  // The changes since the last request are log_[0, logged_). log_limit_ is the most the log holds,
  // std::max(kMinLoggedChanges, sorted_.size()) as of the last request, and log_.size(): kept apart
  // because a vector's size is a subtraction and a division by sizeof(Change), and with them the
  // memory model's fast path ran out of registers.
  std::vector<Change> log_ = std::vector<Change>(kMinLoggedChanges);
  size_t log_limit_ = kMinLoggedChanges;
  size_t logged_ = 0;
  bool stale_ = false;
};

}  // namespace memtrace
