// The memory of one physical GPU summed over the traced processes that used it, on the wall clock: "how full was
// the card, and who held what at its fullest". Each process's totals on the device (allocated, reserved as its
// trace's MemoryModel has them) are a step function of its own time; its TraceStart.start_unix_ns puts them on
// CLOCK_REALTIME. The combined series is their sum, evaluated after every event of every process, the events of
// all processes taken in wall-clock order (ties: the order of `members`, then each file's own order), so its peak
// is exact for the times the traces hold, a transient inside one microsecond included. An event that changes no
// total changes no sum, so the series is the sum after every change of a member's totals. A member's totals fall
// to 0 at the end of its trace (its TraceEnd, or its last event where the trace was cut short): the process is
// gone, and the driver freed what it held.
//
// Design, and why (memory must not grow with the events):
//   1. Each member's trace is replayed twice, one member after the other: a first pass learns the device's layers
//      (model/replay.h, as model/timeline.h plans a timeline), a second follows the ordinal's totals (MemoryModel's
//      totals callback) and spills every change to ONE unlinked temporary file shared by all members (in $TMPDIR,
//      else /tmp) as three zigzag varints: time, allocated and reserved, each a delta from the member's previous
//      change. A change costs a few bytes on disk (measured below), nothing in memory; the models are freed one by
//      one, so what the replays hold is the live allocations of one trace at a time.
//   2. A k-way merge over the members' stretches of the spill: one small read buffer per member (pread, so one file
//      descriptor whatever k is) and a heap of k heads, O(log k) per change. The sums are kept in 128 bits, so
//      they are exact (saturated to UINT64_MAX only where handed on) whatever the files say.
//   3. The peaks' member shares are kept without an O(k) copy at every new maximum: a snapshot per peak and the
//      list of members that changed since it was taken, brought up to date at a new maximum (O(1) amortized per
//      change).
// Measured (bench/gen_trace.cc traces with start times set, one driver-level and one PyTorch, 1,000 allocations
// live): combining two of 100 k events each and two of 1 M events each both peak at 6.5 MiB RSS (0.10 s and
// 1.09 s on one core); the spill of the 2 M changes of the second is 12.9 MB, 6.4 bytes a change.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "read/trace_reader.h"

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
  bool operator==(const CombinedMoment&) const = default;
};

struct CombinedTimeline {
  // The first moment each combined total reached its maximum, with who held what then. All zero (and the shares
  // zero) where no member changed a total.
  CombinedMoment peak_allocated;
  CombinedMoment peak_reserved;
  // The combined series for pictures and `timeline`, at most max_points rows: every change where there are
  // no more than max_points, else per interval of equal wall-clock length (the span from the first change to
  // the last in max_points intervals) one row at the interval's last change holding the interval's maxima
  // (member shares empty), so no peak is lost from the picture.
  std::vector<CombinedMoment> points;
  uint64_t changes = 0;  // the rows the series has before thinning
};

// A member whose trace cannot be combined: its TraceError (the reader's, with its byte offset), or one saying
// that it has no wall-clock start (no TraceStart record, or a start_unix_ns of 0, which no tracer that writes the
// time writes), and the file.
class CombinedTraceError : public TraceError {
 public:
  CombinedTraceError(std::string trace, const TraceError& error)
      : TraceError(error.what(), error.byte_offset(), error.offset_in_what()), trace_(std::move(trace)) {}
  const std::string& trace() const { return trace_; }

 private:
  std::string trace_;
};

// One change of the combined series as the merge hands it on: after applying `member`'s change. The spans are
// every member's current totals (same order as the members), valid during the call only.
struct CombinedChange {
  uint64_t unix_ns = 0;
  uint64_t allocated_bytes = 0;  // saturated at UINT64_MAX (the sum is exact below it)
  uint64_t reserved_bytes = 0;
  size_t member = 0;
  std::span<const uint64_t> member_allocated_bytes;
  std::span<const uint64_t> member_reserved_bytes;
};
using CombinedChangeSink = std::function<void(const CombinedChange&)>;

// The members' change series, spilled (step 1 above) and merged on demand (step 2), for callers that stream the
// rows (`memtrace timeline A B`) rather than keep max_points of them.
class CombinedSeries {
 public:
  // Replays every member's trace, in order, and spills its changes. Throws CombinedTraceError for a member whose
  // trace does not read or has no wall-clock start, std::runtime_error where the temporary file cannot be made
  // or written (the message says which).
  explicit CombinedSeries(std::vector<CombinedMember> members);
  ~CombinedSeries();
  CombinedSeries(const CombinedSeries&) = delete;
  CombinedSeries& operator=(const CombinedSeries&) = delete;

  const std::vector<CombinedMember>& members() const { return members_; }
  // What each member's second pass read (truncation: its changes go up to its last complete chunk).
  const std::vector<TraceReadSummary>& reads() const { return reads_; }
  uint64_t changes() const { return changes_; }  // rows of the merged series
  // The earliest and latest wall-clock time of a change (0 without changes).
  uint64_t first_unix_ns() const { return first_unix_ns_; }
  uint64_t last_unix_ns() const { return last_unix_ns_; }

  // Merges the spilled series and calls on_change after each change, in wall-clock order (ties: member order,
  // then file order; a member's own changes keep their file order even where its clock steps back). Returns the
  // peaks (CombinedTimeline's peak_allocated, peak_reserved). Can be called again. Throws std::runtime_error
  // where the temporary file cannot be read back.
  std::pair<CombinedMoment, CombinedMoment> merge(const CombinedChangeSink& on_change) const;

  // Where each member's changes lie in the spill (bytes), how many there are, and its start_unix_ns.
  struct Stretch {
    uint64_t begin = 0, end = 0;
    uint64_t changes = 0;
    uint64_t start_unix_ns = 0;
  };

 private:
  std::vector<CombinedMember> members_;
  std::vector<TraceReadSummary> reads_;
  std::vector<Stretch> stretches_;
  int spill_fd_ = -1;
  uint64_t changes_ = 0;
  uint64_t first_unix_ns_ = 0, last_unix_ns_ = 0;
};

// Reads every member's trace and combines them: the peaks and the series thinned to at most `max_points` (>= 2)
// rows. Throws as CombinedSeries does.
CombinedTimeline combine_timelines(const std::vector<CombinedMember>& members, size_t max_points);

}  // namespace memtrace
