#include "segment_map.h"

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

uint64_t largest_free_block_bytes(const std::vector<AddressRange>& segments, const std::map<uint64_t, uint64_t>& blocks) {
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
