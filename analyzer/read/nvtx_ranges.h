// NVTX ranges the job opened (torch.cuda.nvtx.range_push, Lightning's and Megatron's ranges), as the tracer
// recorded them through its NVTX injection (docs/tracing.md): what the iteration analysis reads to find the job's
// own iterations and phases where it names them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace memtrace
