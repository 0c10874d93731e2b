// NVTX ranges the job opened (torch.cuda.nvtx.range_push, Lightning's and Megatron's ranges), as the tracer
// recorded them through its NVTX injection (docs/tracing.md): what the iteration analysis reads to find the job's
// own iterations and phases where it names them. The records are RangeName and RangeEvent (proto/memtrace.proto);
// this file pairs them into ranges.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "memtrace.pb.h"

namespace memtrace {

struct NvtxRange {
  std::string name;      // the range's message as the job gave it; "" when it had none or no ASCII/UTF-8 text
  uint32_t tid = 0;      // kernel thread id (Event.tid) of the thread that opened it (push/pop ranges)
  uint32_t depth = 0;    // push/pop nesting depth on that thread when it opened, 0 = outermost; 0 for start/end
  int64_t begin_ns = 0;  // from trace start
  int64_t end_ns = -1;   // -1 when the trace ends before the range did
  // The events that happened inside it, in the replay's numbering (model/replay.h): [first_event, end_event).
  uint64_t first_event = 0;
  uint64_t end_event = 0;
};

// Pairs a trace's RangeEvent records into NvtxRanges, in one pass alongside the events. The contract:
//   - PUSH opens a range on its thread at the depth of that thread's open pushes; POP closes the thread's innermost
//     open push. START opens range `range_id` (depth 0, `tid` the thread that started it); END closes it, from any
//     thread. MARK is not a range and is skipped.
//   - first_event is the number of events read before the opening record, end_event before the closing one: the
//     events between the two records in the file, which is the order the tracer recorded them in. Times are the
//     records' time_us in ns.
//   - A range the trace does not close has end_ns -1 and end_event = the trace's event count.
//   - Hostile or damaged input never fails: a POP with no open push and an END of an unknown range_id are skipped
//     (counted in unmatched()); a START of a range_id still open leaves the earlier range never ended; a name id
//     with no RangeName record (or one defined after its use: names are resolved at finish) gives ""; a name is
//     cut to kMaxNameBytes at a UTF-8 boundary (the reader made it valid UTF-8; control bytes are kept: print it
//     through util/terminal_text.h). Memory is bounded: at most kMaxRanges ranges are kept (later openings counted
//     in ranges_not_kept()), kMaxNames names, kMaxOpenStarts START ranges open at once, kMaxDepth open pushes per
//     thread and kMaxThreads threads (pushes past those are not kept, but still matched by their pops).
class NvtxRangeCollector {
 public:
  static constexpr size_t kMaxRanges = size_t{1} << 20;
  static constexpr size_t kMaxNames = size_t{1} << 16;
  static constexpr size_t kMaxNameBytes = 255;
  static constexpr size_t kMaxOpenStarts = size_t{1} << 16;
  static constexpr size_t kMaxDepth = 4096;
  static constexpr size_t kMaxThreads = size_t{1} << 16;

  // A record of the trace, in file order; `events_before`: how many Event records the file held before it. Records
  // other than RangeName and RangeEvent are ignored.
  void on_record(const proto::Record& record, uint64_t events_before);
  // The ranges in the order they opened, names resolved; `events`: the trace's event count. Call once.
  std::vector<NvtxRange> finish(uint64_t events);

  uint64_t unmatched() const { return unmatched_; }
  uint64_t ranges_not_kept() const { return ranges_not_kept_; }

 private:
  static constexpr size_t kNotKept = SIZE_MAX;
  struct ThreadStack {
    std::vector<size_t> open;  // indices into ranges_ (kNotKept for a push not kept), innermost last
    uint64_t deeper = 0;       // pushes past kMaxDepth still open
  };
  void open_range(const proto::RangeEvent& e, uint64_t events_before, uint32_t depth, size_t* index);
  void close_range(size_t index, const proto::RangeEvent& e, uint64_t events_before);
  void push(const proto::RangeEvent& e, uint64_t events_before);
  void pop(const proto::RangeEvent& e, uint64_t events_before);
  void start(const proto::RangeEvent& e, uint64_t events_before);
  void end(const proto::RangeEvent& e, uint64_t events_before);

  std::vector<NvtxRange> ranges_;
  std::vector<uint64_t> name_ids_;  // per range, resolved at finish
  std::unordered_map<uint64_t, std::string> names_;
  std::unordered_map<uint32_t, ThreadStack> threads_;
  std::unordered_map<uint64_t, size_t> open_starts_;  // range_id -> index into ranges_
  uint64_t unmatched_ = 0;
  uint64_t ranges_not_kept_ = 0;
};

// The NVTX ranges of the trace at `path` (the contract above), read in one pass of its own. For a caller that has
// no pass of its own to add the collector to (analysis/analysis.h fills Analysis::nvtx_ranges in its first pass).
// Throws TraceError where the file does not read (read/trace_reader.h); a truncated trace gives the ranges of its
// complete chunks.
std::vector<NvtxRange> collect_nvtx_ranges(const std::string& path);

}  // namespace memtrace
