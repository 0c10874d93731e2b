#include "segment_map.h"

#include <algorithm>

namespace memtrace {

uint64_t largest_free_block_bytes(const std::vector<AddressRange>& segments, const std::map<uint64_t, uint64_t>& blocks) {
  uint64_t largest = 0;
  for (const AddressRange& segment : segments) {
    uint64_t cursor = segment.start;  // end of the used space so far
    for (auto b = blocks.lower_bound(segment.start); b != blocks.end() && b->first < segment.end; ++b) {
      if (b->first > cursor) largest = std::max(largest, b->first - cursor);
      uint64_t block_end = b->first + std::min(b->second, segment.end - b->first);
      cursor = std::max(cursor, block_end);
    }
    if (segment.end > cursor) largest = std::max(largest, segment.end - cursor);
  }
  return largest;
}

}  // namespace memtrace
