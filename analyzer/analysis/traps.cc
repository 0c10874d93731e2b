#include "analysis/traps.h"

#include <algorithm>
#include <cstdlib>

#include "util/format.h"

namespace memtrace {

const char* trap_json_name(TrapKind kind) {
  switch (kind) {
    case TrapKind::kKeptGraph: return "kept_graph";
    case TrapKind::kKeptTensor: return "kept_tensor";
    case TrapKind::kCacheNotLeak: return "cache_not_leak";
    case TrapKind::kAllocatorRetention: return "allocator_retention";
  }
  return "kept_graph";
}

namespace {

std::optional<Trap> kept_graph(const ForwardKept& kept) {
  uint64_t per_iteration = median_from_second(kept.per_iteration_bytes);
  // A graph's saved tensors come from several operators (a linear layer's input, an activation's input...):
  // one site kept per iteration is a tensor the loop stores, not a graph.
  if (per_iteration == 0 || kept.sites_every_iteration < 2) return std::nullopt;
  Trap t;
  t.kind = TrapKind::kKeptGraph;
  t.kept_per_iteration_bytes = per_iteration;
  t.kept_sites = kept.sites_every_iteration;
  t.title = "a graph kept alive across iterations: " + format_bytes(per_iteration) +
            " of forward allocations per iteration at " + std::to_string(t.kept_sites) + " call sites stay live";
  t.advice = kept.backward_seen
                 ? "Outputs or the loss are kept with their autograd history (or backward(retain_graph=True)): keep "
                   "`loss.item()` or `out.detach()` instead."
                 : "No backward frees them: the loop runs without torch.no_grad() and keeps its outputs or loss, "
                   "each holding its whole graph. Wrap the loop in `with torch.inference_mode():` (or "
                   "torch.no_grad()), or keep `loss.item()` / `out.detach()`.";
  return t;
}

// One site kept per iteration: a tensor the loop stores (the kept-graph trap's counterpart for one site).
std::optional<Trap> kept_tensor(const ForwardKept& kept) {
  if (kept.sites_every_iteration != 1 || kept.lone_site_per_iteration_bytes == 0) return std::nullopt;
  Trap t;
  t.kind = TrapKind::kKeptTensor;
  t.kept_per_iteration_bytes = kept.lone_site_per_iteration_bytes;
  t.kept_sites = 1;
  const std::string made_at = kept.lone_site_line.empty() ? "one call site" : kept.lone_site_line;
  t.title = "a tensor kept per iteration: the output of " + made_at + ", " + format_bytes(t.kept_per_iteration_bytes) +
            " each, is still referenced after its iteration";
  t.advice =
      "A list or attribute keeps one per iteration (`outputs.append(out)`, `losses.append(loss)`): store "
      "`.item()` or a CPU copy (`.cpu()`) instead, or drop the reference when the iteration ends.";
  return t;
}

std::optional<Trap> cache_not_leak(const IterationFigures& f) {
  if (!f.allocated_growth_per_iteration_bytes || *f.allocated_growth_per_iteration_bytes >= kFlatGrowthBytes ||
      *f.allocated_growth_per_iteration_bytes <= -kFlatGrowthBytes)
    return std::nullopt;
  const IterationMemory& last = f.iterations.back();
  if (last.reserved_at_end_bytes < kCacheRatio * last.allocated_at_end_bytes ||
      last.reserved_at_end_bytes - last.allocated_at_end_bytes < kCacheMinBytes)
    return std::nullopt;
  Trap t;
  t.kind = TrapKind::kCacheNotLeak;
  t.allocated_bytes = last.allocated_at_end_bytes;
  t.reserved_bytes = last.reserved_at_end_bytes;
  t.allocated_growth_per_iteration_bytes = *f.allocated_growth_per_iteration_bytes;
  t.title = "a cache, not a leak: " + format_bytes(t.reserved_bytes) + " reserved for " +
            format_bytes(t.allocated_bytes) + " allocated, allocated flat across iterations";
  uint64_t peak = 0;
  for (const IterationMemory& m : f.iterations) peak = std::max(peak, m.peak_allocated_bytes);
  t.advice =
      "The difference is PyTorch's caching allocator keeping freed blocks for reuse (nvidia-smi shows "
      "reserved; the iterations' peak allocated is " +
      format_bytes(peak) + "), not memory the job keeps: allocated changes by " +
      format_bytes(uint64_t(std::abs(t.allocated_growth_per_iteration_bytes))) +
      " per iteration. torch.cuda.empty_cache() gives the cache back, which helps only other processes.";
  return t;
}

std::optional<Trap> allocator_retention(const IterationFigures& f) {
  if (!f.allocated_growth_per_iteration_bytes || !f.reserved_growth_per_iteration_bytes) return std::nullopt;
  if (*f.reserved_growth_per_iteration_bytes <= 0 || *f.allocated_growth_per_iteration_bytes >= kFlatGrowthBytes)
    return std::nullopt;
  Trap t;
  t.kind = TrapKind::kAllocatorRetention;
  t.allocated_growth_per_iteration_bytes = *f.allocated_growth_per_iteration_bytes;
  t.reserved_growth_per_iteration_bytes = *f.reserved_growth_per_iteration_bytes;
  t.allocated_bytes = f.iterations.back().allocated_at_end_bytes;
  t.reserved_bytes = f.iterations.back().reserved_at_end_bytes;
  t.title = "allocator retention: reserved grows " + format_bytes(uint64_t(t.reserved_growth_per_iteration_bytes)) +
            " per iteration while allocated does not";
  t.advice =
      "The allocator takes new segments it cannot fill with the freed ones (tensor sizes that vary from one "
      "iteration to the next fragment its cache). Try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
      "or sizes that repeat (padding to fixed shapes).";
  return t;
}

}  // namespace

std::vector<Trap> find_traps(const IterationFigures& figures, const ForwardKept& kept) {
  std::vector<Trap> traps;
  if (figures.iterations.empty()) return traps;
  if (auto t = kept_graph(kept)) traps.push_back(*t);
  if (auto t = kept_tensor(kept)) traps.push_back(*t);
  if (auto t = cache_not_leak(figures)) traps.push_back(*t);
  if (auto t = allocator_retention(figures)) traps.push_back(*t);
  return traps;
}

}  // namespace memtrace
