// The memory of one physical GPU summed over the traced processes that used it, on the wall clock: "how full was
// the card, and who held what at its fullest". Each process's totals on the device (allocated, reserved as its
// trace's MemoryModel has them) are a step function of its own time; its TraceStart.start_unix_ns puts them on
// CLOCK_REALTIME. The combined series is their sum, evaluated after every event of every process, the events of
// all processes taken in wall-clock order (ties: the order of `members`, then each file's own order), so its peak
// is exact for the times the traces hold, a transient inside one microsecond included.
//
// Memory: the traces are read as streams (each member's changes go through a bounded buffer or a temporary
// spill, never a whole series in memory), so what the combination holds grows with the members' live
// allocations, not with their events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fleet/process_summary.h"

namespace memtrace {

// One process's use of the GPU: its trace and the CUDA ordinal the GPU had in that process.
struct CombinedMember {
  std::string trace;
  int32_t ordinal = -1;
};

// The GPU's combined totals at one moment, and each member's share (same order as the members).
struct CombinedMoment {
  uint64_t unix_ns = 0;
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  std::vector<uint64_t> member_allocated_bytes;
  std::vector<uint64_t> member_reserved_bytes;
};

struct CombinedTimeline {
  // The first moment each combined total reached its maximum, with who held what then.
  CombinedMoment peak_allocated;
  CombinedMoment peak_reserved;
  // The combined series for pictures and `timeline`, at most max_points rows: every change where there are
  // fewer, else per interval of equal wall-clock length the interval's maxima (member shares empty), so no peak
  // is lost from the picture.
  std::vector<CombinedMoment> points;
};

// Reads every member's trace (throws TraceError, naming the file, for one that does not read) and combines them.
// `max_points` >= 2.
CombinedTimeline combine_timelines(const std::vector<CombinedMember>& members, size_t max_points);

}  // namespace memtrace
