#include "read/event_decoder.h"

namespace memtrace::event_wire {

// Out of line: only the records that end within 9 bytes of a piece of zstd output, or that straddle
// two pieces, come here.
bool decode_event_fields_bounded(const unsigned char* p, const unsigned char* end, EventFields& e) {
  while (p < end) {
    uint64_t tag = 0, value = 0;
    if (!read_varint(p, end, &tag)) return false;
    if (!read_varint(p, end, &value) || !store_field(e, tag, value)) return false;
  }
  return true;
}

}  // namespace memtrace::event_wire
