// What was live on a device at one moment (its peak allocated, or a chosen time), broken down the way the OOM
// guides reason: parameters, gradients, optimizer state, activations, temporaries, library workspaces, and what the
// device holds outside PyTorch's allocator. `memtrace peak` prints it with the live allocations as a tree by user
// line (live_tree.h); `memtrace summary` prints it at each device's peak.
//
// The categories, in trace terms. Each counts at the allocated layer (DeviceState::counts_as_allocated: PyTorch's
// and stream-ordered pools' blocks on a device with a block layer, else the driver-layer allocations), so that
// they add up to the device's allocated total at the moment. An allocation is placed by the event that allocated
// it (its index in the replay's numbering, LiveAllocation::event_index), the event that freed it (the first later
// event after which it is no longer live, or none: live to the end of the trace) and the job's iterations and
// phases (phases.h, EventPhases):
//   library workspaces  a block whose stack shows PyTorch asking for a library's workspace (a native frame in
//                       at::cuda:: or at::native:: whose name holds "Workspace": cuBLAS/cuBLASLt and cuDNN
//                       workspaces): from the stack alone, whatever the phases say; PyTorch keeps them.
//   parameters          allocated outside every iteration before the first one, and live at least to the end of
//                       the last iteration (never freed, or freed after it).
//   gradients           allocated in a backward phase and live past the end of that iteration.
//   optimizer state     allocated in an optimizer phase and live past the end of that iteration.
//   activations         allocated in a forward phase and freed in a backward phase of the same iteration (live at
//                       the moment because the backward has not freed them yet); a forward allocation live past
//                       the end of its iteration counts here too and is also counted apart as "kept across
//                       iterations" (a graph or an output kept: the iteration analysis names that trap).
//   temporaries         allocated in an iteration and freed before its end, other than activations (freed in the
//                       phase that allocated it, or in a later one that is not a forward's backward).
//   unclassified        everything the rules above cannot tell: the whole allocated total where no iterations are
//                       known (EventPhases source kNone); set-up allocations freed during the iterations; anything
//                       allocated between or after iterations; an allocation of an "other" phase kept past its
//                       iteration; on a device without a block layer, the part of allocated (its driver total)
//                       that no allocation accounts for: what its stream-ordered pools reserve (POOL_RESERVED
//                       samples) beyond their blocks, bytes without a count. Never guessed into another row.
// Where a block's stack has PyTorch frames not symbolized on the analyzing machine, the workspace rule could not be
// applied to it: such blocks are counted apart within their rows (MomentBreakdown::unsymbolized), and a dominance
// verdict never rests on them (peak_dominance).
// And beside them, not part of the allocated total (only on a device with a block layer: without one, allocated is
// the driver layer and these are in the rows above):
//   outside PyTorch's allocator, by layer   driver-layer allocations charged to the device (device pointers and
//                       VMM handles, arrays) that are not PyTorch's segments (never held a block, and not asked
//                       for by the caching allocator: frame_roles.h allocating_layer), by the layer that asked:
//                       cuBLAS, cuDNN, NCCL, other (the program itself, other libraries).
//   PyTorch's cache     reserved - allocated at the moment, where PyTorch's allocator has reported on the device:
//                       what its segments hold free.
//   CUDA context and unattributed   DeviceUsage::unattributed_bytes of the DEVICE_USAGE sample nearest the moment:
//                       the latest at or before it, else the first after it (the process's NVML figure minus what
//                       the events account for: the context, and anything no API reports).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/phases.h"
#include "stacks/frame_roles.h"
#include "stacks/frames.h"

namespace memtrace {

enum class BreakdownRow : uint8_t {
  kParameters,
  kGradients,
  kOptimizerState,
  kActivations,
  kTemporaries,
  kWorkspaces,
  kUnclassified,
};
inline constexpr size_t kBreakdownRows = 7;
// "parameters", "gradients", "optimizer state", "activations", "temporaries", "library workspaces",
// "unclassified".
const char* breakdown_row_name(BreakdownRow row);
// The JSON key of a row: "parameters", ..., "library_workspaces", "unclassified".
const char* breakdown_row_key(BreakdownRow row);

// Where the phases place one allocation (the design comment above says how): its row, and for activations
// whether it was kept past its iteration. `freed_event`: the index of the event that freed it, nullopt where it
// was never freed. An event index the phases do not cover is unclassified.
struct Placement {
  BreakdownRow row = BreakdownRow::kUnclassified;
  bool kept_across_iterations = false;
};
Placement place_allocation(uint64_t allocated_event, std::optional<uint64_t> freed_event, const EventPhases& phases);

// Whether a stack shows PyTorch asking for a library's workspace (the "library workspaces" rule above).
bool is_library_workspace(const ResolvedStack& stack);

// Whether this machine could not read a stack's PyTorch frames, so that the workspace rule (which reads their
// function names) could not be applied to it: the stack has frames in PyTorch's libraries (modules libtorch*,
// libc10*) and the symbolizer named none of them (the libraries are not on this machine), or a frame of any module
// is of another build than the one recorded. A block told as another row may then be a library workspace. Where
// some of its PyTorch frames are named (the machine has the libraries), the rule applies: PyTorch's workspace
// functions are exported symbols, while some of its internal functions have no symbol even there.
bool pytorch_frames_unsymbolized(const ResolvedStack& stack);

struct ByteCount {
  uint64_t bytes = 0;
  uint64_t count = 0;
  void add(uint64_t size_bytes);
};

// One allocation of the allocated kind live at the moment.
struct LiveAtMoment {
  LiveAllocation allocation;
  std::optional<uint64_t> freed_event;  // the event that freed it later, nullopt: live to the end of the trace
  Placement placement;
};

// The layers outside PyTorch's allocator (AllocatingLayer less kPyTorchAllocator), in this order.
inline constexpr std::array<AllocatingLayer, 4> kOutsideLayers = {AllocatingLayer::kCublas, AllocatingLayer::kCudnn,
                                                                  AllocatingLayer::kNccl, AllocatingLayer::kOther};

struct MomentBreakdown {
  int32_t device = -1;
  uint64_t event_index = 0;  // the moment: right after this event
  int64_t time_ns = 0;
  DeviceTotals totals;  // at the moment, with the trace's layers (as the summary's)
  IterationSource phases_source = IterationSource::kNone;
  // Of the moment's event where the phases cover it: its iteration (-1 outside) and phase.
  std::optional<int32_t> iteration;
  Phase phase = Phase::kOutside;
  std::array<ByteCount, kBreakdownRows> rows;  // indexed by BreakdownRow; they add up to totals.allocated_bytes
  ByteCount activations_kept;                  // part of rows[kActivations]: kept past their iteration
  // Part of each row (never of library workspaces): the blocks whose stack has a native frame not symbolized here
  // (pytorch_frames_unsymbolized), where a library workspace cannot be told apart.
  std::array<ByteCount, kBreakdownRows> unsymbolized;
  // Whether any event of the phases is of a backward or optimizer phase: a training loop; without one, a loop
  // with no backward (inference), for which the dominance advice differs.
  bool training_seen = false;
  // Outside PyTorch's allocator: only where the device has a block layer (else allocated is the driver layer).
  bool outside_applies = false;
  std::array<ByteCount, kOutsideLayers.size()> outside;  // indexed as kOutsideLayers
  // reserved - allocated, where PyTorch's allocator has reported on the device.
  std::optional<uint64_t> cache_bytes;
  std::optional<DeviceUsage> usage;  // the DEVICE_USAGE sample nearest the moment, if any
  std::vector<LiveAtMoment> live;    // in no particular order
  const ByteCount& row(BreakdownRow r) const { return rows[size_t(r)]; }
  uint64_t outside_bytes() const;
  ByteCount unsymbolized_total() const;  // the sum of `unsymbolized` over the rows
};

// One moment asked for: right after event `event_index`, on `device`; `at_attach`: right before it, after the
// records of what was live at attach (model/replay.h ReplayMoment).
struct Moment {
  int32_t device = -1;
  uint64_t event_index = 0;
  bool at_attach = false;
};
// The moment of `device`'s `peak` (its peak allocated, say), at attach where the peak was reached there.
inline Moment moment_of_peak(int32_t device, const Peak& peak) {
  return Moment{device, peak.event_index, peak.at_attach};
}

// Replays the trace of `analysis` (its path, with its layer hints) and breaks down each of `moments` (any order,
// a device and event listed twice is broken down twice) with `phases` (which may be of source kNone: then every
// allocation is unclassified), resolving stacks with `resolver` for the workspace rule and the layers outside
// PyTorch's allocator. The replay reads on past the last moment only as far as it must: to the end where phases
// are known (every live allocation's free matters), else until each moment has a device usage sample (or to the
// end where none follows). Returns the breakdowns in the order of `moments`; a moment past the trace's last event
// has empty rows. Throws TraceError where the file no longer reads.
std::vector<MomentBreakdown> break_down_moments(const Analysis& analysis, std::span<const Moment> moments,
                                                const EventPhases& phases, FrameResolver& resolver);

// The breakdown at `device`'s peak allocated without iterations known, from what the one pass of
// analyze_trace(path, true) took there (Analysis::live_at_peak, outside_at_peak, fragmentation_at_peak): no
// replay, so that `summary` still reads the trace once. Every row is unclassified but the library workspaces; the
// usage is the device's `peak_usage` (the summary's "device usage at peak"); totals hold allocated and reserved
// (driver_bytes 0: not taken there); `live` is empty. A device without a captured peak has empty rows.
MomentBreakdown break_down_captured_peak(const Analysis& analysis, int32_t device, FrameResolver& resolver);

// The breakdown at each device's peak allocated (the devices with one), by device: with `phases` found
// (summary, diff), a replay follows every live block to its free (break_down_moments); without them, from what
// the first pass captured at the peaks (break_down_captured_peak, no second read of the trace). Throws
// TraceError where the file no longer reads.
std::map<int32_t, MomentBreakdown> breakdowns_at_peaks(const Analysis& analysis, const EventPhases& phases,
                                                       FrameResolver& resolver);

// The last event at or before a time, found by a replay of the trace that stops past it.
struct EventAtTime {
  std::optional<uint64_t> event;  // its index; nullopt where the trace's first event comes later (or has none)
  int64_t first_event_ns = 0;     // the time of the trace's first event (from trace start), where it has one
};
// `time_ns`: nanoseconds from trace start. Throws TraceError where the file of `analysis` no longer reads.
EventAtTime last_event_at_or_before(const Analysis& analysis, int64_t time_ns);

// The share of the allocated total (percent) above which the peak is "dominated" by activations, or by
// parameters, gradients and optimizer state together (docs/numbers.md says why 50).
inline constexpr uint64_t kDominantSharePercent = 50;
enum class PeakDominance { kNone, kActivations, kModelState };
// Which of the two dominates `breakdown`'s allocated total: more than kDominantSharePercent of it, without
// counting the blocks whose native frames are not symbolized (MomentBreakdown::unsymbolized: any of them may be a
// library workspace), so that the verdict holds whatever they are. kNone without phases (every row but
// workspaces unclassified) or where neither does.
PeakDominance peak_dominance(const MomentBreakdown& breakdown);
// The verdict the rows would give counting those blocks, where peak_dominance gives none because of them: the
// dominance is then uncertain. kNone where it is not (no such blocks, or none dominates either way).
PeakDominance uncertain_dominance(const MomentBreakdown& breakdown);
// The bytes of the share `dominance` names (activations, or parameters + gradients + optimizer state), counting
// the blocks not symbolized (`with_unsymbolized`) or not. 0 for kNone.
uint64_t dominance_share_bytes(const MomentBreakdown& breakdown, PeakDominance dominance, bool with_unsymbolized);

}  // namespace memtrace
