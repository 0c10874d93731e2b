// The job's iterations and the phase of each event, found from what the trace already holds (no code change in
// the job), and what memory did per iteration: allocated at each iteration's end, the iteration's peak and the
// phase it happened in, and the steady growth per iteration.
//
// Like heaptrack's peaktracker, the analysis is a pass over the events in order that keeps, per event, only what
// it needs (the event's time and stack: EventOrigins) and reads each distinct stack once, never per event.
// Three steps:
//
// 1. Iterations, from NVTX ranges where the job names them: ranges of one name that repeat (2 or more) on one
//    thread at one nesting depth are the iterations (the outermost such name wins, then the most repeated; names
//    of phases -- forward, backward, optim... -- are not iterations). Each range's events are one iteration.
// 2. Otherwise from the Python loop. Of the events with Python frames, the frames that sit at the same depth
//    from the outermost frame with the same (file, function) chain above them in more than half of those
//    events form one chain (<module> > main > train ...). The loop is in the outermost frame of that chain that
//    is the user's own code (frame_roles.h) and whose line varies in a way that repeats: a line is part of the
//    loop's body when events come back to it after events at other lines (it has 2 runs or more); lines seen
//    in one run only are set-up before the loop or clean-up after it. An iteration starts at an event whose
//    line in the loop frame is the smallest line of the body (the first statement that allocates) after events
//    at other lines. Inner loops (a generation loop's `for i in range(layers)`) sit at higher lines and do not
//    start iterations. Where the loop frame's line never varies (`for ...: train_step()`), no iteration starts
//    there and the next frame down (train_step, a new call of which is a new iteration) is tried.
//    An iteration ends where the next one starts; the last one ends after its last event in the loop frame plus
//    as many events as the other iterations have after theirs (the frees that end a step: the optimizer's
//    temporaries, freed without a stack), stopping earlier at Python finalization or at an event whose Python
//    frames have left the loop. Events without Python frames (the autograd worker thread, other threads, frees)
//    belong to the iteration in effect at their position.
// 3. Phases, inside each iteration, in event order: backward where the Python frames are in torch's backward
//    (torch/autograd/graph.py _engine_run_backward, torch/autograd/__init__.py backward or grad) or the native
//    frames are torch::autograd::Engine's or an autograd node's (the worker thread); optimizer where the Python
//    frames are under torch/optim/ or in a zero_grad; an event with other Python frames is forward before the
//    iteration's first backward event and other after it; an event without Python frames and without autograd
//    frames (a free, a worker-thread allocation whose native frames could not be symbolized) takes the phase in
//    effect (that of the event before it). NVTX ranges nested in an iteration range and named like a phase
//    (case-insensitive "forward"/"fwd", "backward"/"bwd", "optim", or "step" inside the iteration) override it.
//    An evaluation or generation loop has no backward: every event of its iterations is forward.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/phases.h"
#include "model/memory_model.h"
#include "read/nvtx_ranges.h"
#include "stacks/frames.h"
#include "stacks/stack_table.h"

namespace memtrace {

// What the iteration analysis keeps of the events, in the replay's numbering: 12 bytes per event (its time and
// its stack, as an index into the trace's distinct stack ids), so that a trace of 100 million events takes
// 1.2 GB here, no more than the per-event vectors of EventPhases it makes (5 bytes per event) and the replay.
struct EventOrigins {
  std::vector<int64_t> time_ns;           // per event, from trace start
  std::vector<uint32_t> stack;            // per event: index into stack_ids
  std::vector<uint64_t> stack_ids = {0};  // the distinct stack ids, in order of first use; [0] is 0 (no stack)
  std::vector<uint64_t> finalizing;       // the PYTHON_FINALIZING events, ascending: no iteration reaches past one
  size_t size() const { return stack.size(); }
};

// One pass over the trace at `path` collecting EventOrigins. Throws TraceError where the file does not read
// (read_trace).
EventOrigins collect_event_origins(const std::string& path);

// The iterations and phases of `events` (collect_event_origins), with `stacks` (the trace's StackTable, every
// record read) giving each stack's Python frames and `resolver` (over the same table) the native frames of
// those without Python frames, each read once per stack id; and `nvtx` the job's NVTX ranges (empty for traces
// without them). Source kNone and empty per-event vectors where no iteration is found (fewer than 2). Cost:
// O(events x L) with L at most kMaxLoopFramesTried, plus O(stacks x depth) for the stacks' frames.
EventPhases find_iterations(const EventOrigins& events, const StackTable& stacks, FrameResolver& resolver,
                            const std::vector<NvtxRange>& nvtx);

// Frames of the majority chain (design comment, step 2) whose events are scanned for a loop, at most: each scan
// reads every event once, and a job's loop sits within the first few frames of its own code.
inline constexpr size_t kMaxLoopFramesTried = 8;

// What one iteration did to one device's memory ("allocated" and "reserved" as the reports mean them:
// DeviceTotals).
struct IterationMemory {
  uint64_t peak_allocated_bytes = 0;   // the highest allocated after any of its events
  Phase peak_phase = Phase::kOutside;  // the phase of the first event that reached it
  uint64_t peak_event = 0;
  uint64_t allocated_at_end_bytes = 0;  // after its last event, just before the next iteration's first
  uint64_t reserved_at_end_bytes = 0;
};

// An allocation made in an iteration and still live at the end of the last one: what the iterations kept.
struct KeptAllocation {
  uint64_t stack_id = 0;
  uint64_t size_bytes = 0;
  uint32_t iteration = 0;  // index into EventPhases::iterations
  Phase phase = Phase::kOutside;
};

struct IterationFigures {
  int32_t device = -1;  // the device measured: the one with the highest peak allocated (lowest ordinal on ties)
  std::vector<IterationMemory> iterations;  // one per EventPhases::iterations
  // steady_growth of the allocated and reserved at the iterations' ends; nullopt with fewer than 2 iterations.
  std::optional<int64_t> allocated_growth_per_iteration_bytes;
  std::optional<int64_t> reserved_growth_per_iteration_bytes;
  // The allocated-kind allocations of `device` live at the last iteration's end that one of the iterations made,
  // in no particular order.
  std::vector<KeptAllocation> kept_at_last_end;
};

// Replays the trace at `path` (with the first pass's `hints`) and measures every iteration of `phases` on
// `device`. Empty figures where phases has no iteration. Throws TraceError where the file does not read.
IterationFigures measure_iterations(const std::string& path, const std::map<int32_t, LayerHint>& hints,
                                    const EventPhases& phases, int32_t device);

// The steady growth of a quantity sampled at the end of each iteration: the median of its deltas from one
// iteration's end to the next, from the 2nd iteration's end on (the deltas of iterations 3, 4, ...), as
// tests/gpu/iteration_jobs.py computes its truth: the first iterations allocate what then stays for the
// whole run (gradients, optimizer state, the allocator's and the libraries' workspaces, made at first use),
// which is set-up, not growth. With 2 values, their one delta. The median of an even count is the mean of
// the two middle deltas, rounded toward zero (Python's int(statistics.median(...))). nullopt for fewer than 2.
std::optional<int64_t> steady_growth(const std::vector<uint64_t>& at_end_bytes);

// The median, from the 2nd iteration on, of per-iteration amounts (bytes one call site kept from each
// iteration): what a site keeps per iteration. Even counts as steady_growth. 0 with fewer than 2 iterations.
uint64_t median_from_second(const std::vector<uint64_t>& per_iteration_bytes);

// "12 iterations, from the loop in train whose body starts at iteration_jobs.py:70", "12 iterations, from NVTX ranges
// \"step\"", "no iterations found".
std::string iterations_found_text(const EventPhases& phases);

}  // namespace memtrace
