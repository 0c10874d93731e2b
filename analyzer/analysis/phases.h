// The job's iterations and the phase of each event in them: the seam between the analysis that finds them
// (analysis/iterations.h: from the Python frames' loop, backward and optimizer frames, or NVTX ranges) and those
// that use them (the peak breakdown, growth per iteration, the traps, diff).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memtrace {

// What the job was doing when an event happened. kOutside: before the first iteration or after the last one
// (model set-up, loading, the end of the run).
enum class Phase : uint8_t { kOutside, kForward, kBackward, kOptimizer, kOther };

// "outside iterations", "forward", "backward", "optimizer", "other".
const char* phase_name(Phase phase);

// One iteration: the events [first_event, end_event) in the replay's event numbering (replay.h: the index of
// the event among all events of the trace, from 0), and its time span [begin_ns, end_ns) from trace start.
struct IterationSpan {
  uint64_t first_event = 0;
  uint64_t end_event = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

// How the iterations were found.
enum class IterationSource : uint8_t {
  kNone,        // no iteration found: reports fall back to time and say so
  kPythonLoop,  // a loop of the user's Python code (`loop_file`:`loop_line` in `loop_function`)
  kNvtx,        // NVTX ranges named `range_name`, one per iteration
};

struct EventPhases {
  IterationSource source = IterationSource::kNone;
  std::string loop_file;      // kPythonLoop: the file and function of the loop, and the first line of its body
  std::string loop_function;  // that allocates (the line each iteration starts at)
  uint32_t loop_line = 0;
  std::string range_name;  // kNvtx
  std::vector<IterationSpan> iterations;  // in event order, not overlapping
  // Per event, in the replay's numbering (both the size of the trace's event count, or empty when source is
  // kNone): the index into `iterations` of the iteration the event belongs to, or -1 outside every iteration;
  // and its phase (kOutside exactly where iteration is -1).
  std::vector<int32_t> iteration_of_event;
  std::vector<Phase> phase_of_event;
};

}  // namespace memtrace
