// The memory traps a PyTorch user falls into, named in plain words with the figures that show them, each only
// where its signature is in the per-iteration figures (iterations.h):
//   kept graph          forward allocations kept from every iteration at several call sites while no backward
//                       frees them: an evaluation without torch.no_grad()/inference_mode() that keeps its outputs
//                       or loss, or outputs kept with their history (a graph's saved tensors come from several
//                       operators; one kept tensor, such as a detached output, is one site and no graph);
//   kept tensor         forward allocations kept from every iteration at exactly one call site: a tensor the loop
//                       stores (a list of outputs or losses, an attribute), one per iteration;
//   cache, not a leak   reserved far above allocated (at least kCacheRatio times it and kCacheMinBytes more) at the
//                       last iteration's end while allocated is flat across iterations;
//   allocator retention reserved grows per iteration while allocated does not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/iterations.h"

namespace memtrace {

enum class TrapKind { kKeptGraph, kKeptTensor, kCacheNotLeak, kAllocatorRetention };

// "kept_graph", "kept_tensor", "cache_not_leak", "allocator_retention" (the --json names).
const char* trap_json_name(TrapKind kind);

struct Trap {
  TrapKind kind = TrapKind::kKeptGraph;
  std::string title;   // the trap in plain words, one line
  std::string advice;  // what the figures show and what to change, one or two sentences
  // The figures (bytes); those a trap does not use are 0.
  // kept graph, kept tensor: forward bytes kept per iteration (median from the 2nd), and the call sites keeping
  // forward allocations every iteration (1 for a kept tensor)
  uint64_t kept_per_iteration_bytes = 0;
  uint64_t kept_sites = 0;
  uint64_t allocated_bytes = 0;  // at the last iteration's end
  uint64_t reserved_bytes = 0;
  int64_t allocated_growth_per_iteration_bytes = 0;
  int64_t reserved_growth_per_iteration_bytes = 0;
};

// What the kept-graph and kept-tensor traps read of the allocations live at exit (the leak candidates), per
// iteration.
struct ForwardKept {
  std::vector<uint64_t> per_iteration_bytes;  // forward-phase allocations live at exit, by iteration allocated
  uint64_t sites_every_iteration = 0;         // call sites whose forward allocations live at exit have a median > 0
  bool backward_seen = false;                 // some event of the iterations is in the backward phase
  // Where sites_every_iteration is 1: that site's median from the 2nd iteration of its forward bytes kept, and
  // its user line ("iteration_jobs.py:76 train"; "" where its stack has no Python frames).
  uint64_t lone_site_per_iteration_bytes = 0;
  std::string lone_site_line;
};

inline constexpr uint64_t kCacheRatio = 2;
inline constexpr uint64_t kCacheMinBytes = uint64_t(256) << 20;
// Growth below this per iteration is "flat" for the allocated side of the cache and retention traps: the
// allocator rounds blocks to 512 bytes and small bookkeeping tensors come and go.
inline constexpr int64_t kFlatGrowthBytes = int64_t(1) << 20;

// The traps whose signature `figures` and `kept` show, in TrapKind order. None without iterations.
std::vector<Trap> find_traps(const IterationFigures& figures, const ForwardKept& kept);

}  // namespace memtrace
