// Free space inside an allocator's segments, rebuilt from addresses alone: PyTorch reports its blocks
// (address, size) and memtrace sees the driver allocations (or VMM mappings) they are carved from, so
// the gaps between live blocks are the allocator's free blocks. This is the layout that
// torch.cuda.memory_snapshot() shows, without asking PyTorch.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "block_index.h"

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
uint64_t largest_free_block_bytes(const std::vector<AddressRange>& segments, const std::map<uint64_t, uint64_t>& blocks);
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

}  // namespace memtrace
