#include "report/text/peak_text.h"

#include <string>

#include "stacks/frame_roles.h"
#include "util/format.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

// Where the iterations come from, or why there are none.
std::string phases_source_text(const MomentBreakdown& b) {
  switch (b.phases_source) {
    case IterationSource::kPythonLoop: return "iterations from the Python loop";
    case IterationSource::kNvtx: return "iterations from NVTX ranges";
    case IterationSource::kNone: break;
  }
  return "no iterations found: what each block is for is not known, it counts as unclassified";
}

// "in iteration 3 (backward)", "outside iterations", or "" without phases.
std::string moment_phase_text(const MomentBreakdown& b) {
  if (!b.iteration) return "";
  if (*b.iteration < 0) return ", outside iterations";
  return ", in iteration " + std::to_string(*b.iteration + 1) + " (" + phase_name(b.phase) + ")";
}

uint64_t percent_of(uint64_t part, uint64_t whole) {
  using Wide = unsigned __int128;
  return whole ? uint64_t(Wide(part) * 100 / whole) : 0;
}

std::string outside_layer_name(AllocatingLayer layer) {
  return layer == AllocatingLayer::kOther ? "other (the program, other libraries)" : allocating_layer_name(layer);
}

// "PyTorch's cache (reserved - allocated) 8.94 MiB (...); outside PyTorch's allocator 128 MiB (...): cuBLAS
// workspace ..., other ...; CUDA context and unattributed 613 MiB (...) (device usage at 8.009 s)", in lines.
void print_beside(std::ostream& out, const MomentBreakdown& b, const char* indent) {
  if (b.cache_bytes) out << indent << "PyTorch's cache (reserved - allocated) " << format_bytes(*b.cache_bytes) << '\n';
  if (b.outside_applies) {
    out << indent << "outside PyTorch's allocator " << format_bytes(b.outside_bytes());
    std::string parts;
    for (size_t i = 0; i < kOutsideLayers.size(); ++i) {
      if (!b.outside[i].count) continue;
      parts += std::string(parts.empty() ? ": " : ", ") + outside_layer_name(kOutsideLayers[i]) + ' ' +
               format_bytes(b.outside[i].bytes) + " in " + count_of(b.outside[i].count, "allocation");
    }
    out << parts << '\n';
  }
  if (b.usage && b.usage->process_used_bytes)
    out << indent << "CUDA context and unattributed " << format_bytes(b.usage->unattributed_bytes())
        << " (device usage sampled at " << format_seconds(seconds(b.usage->time_ns)) << ")\n";
}

void print_dominance(std::ostream& out, const MomentBreakdown& b, const char* indent) {
  switch (peak_dominance(b)) {
    case PeakDominance::kNone: return;
    case PeakDominance::kActivations:
      out << indent << "PEAK DOMINATED BY ACTIVATIONS: "
          << percent_of(b.row(BreakdownRow::kActivations).bytes, b.totals.allocated_bytes)
          << "% of allocated. To lower it: smaller micro-batches with gradient accumulation, mixed precision "
             "(autocast to bf16/fp16), activation checkpointing (torch.utils.checkpoint).\n";
      return;
    case PeakDominance::kModelState: {
      uint64_t state = b.row(BreakdownRow::kParameters).bytes + b.row(BreakdownRow::kGradients).bytes +
                       b.row(BreakdownRow::kOptimizerState).bytes;
      out << indent << "PEAK DOMINATED BY PARAMETERS, GRADIENTS AND OPTIMIZER STATE: "
          << percent_of(state, b.totals.allocated_bytes)
          << "% of allocated. Smaller batches will not lower it much: shard them across GPUs (FSDP, DeepSpeed "
             "ZeRO), or keep a smaller optimizer state.\n";
      return;
    }
  }
}

}  // namespace

void print_breakdown_lines(std::ostream& out, const MomentBreakdown& b, const char* indent) {
  out << indent << "breakdown (" << phases_source_text(b) << moment_phase_text(b) << "):\n";
  const std::string inner = std::string(indent) + "  ";
  out << inner << "allocated " << format_bytes(b.totals.allocated_bytes);
  const char* separator = ": ";
  for (size_t r = 0; r < kBreakdownRows; ++r) {
    if (!b.rows[r].count) continue;
    out << separator << breakdown_row_name(BreakdownRow(r)) << ' ' << format_bytes(b.rows[r].bytes);
    if (BreakdownRow(r) == BreakdownRow::kActivations && b.activations_kept.count)
      out << " (kept across iterations " << format_bytes(b.activations_kept.bytes) << ')';
    separator = ", ";
  }
  out << '\n';
  print_beside(out, b, inner.c_str());
  print_dominance(out, b, inner.c_str());
}

std::string call_site_line(const ResolvedStack& stack) {
  std::string python, op, native;
  for (const Frame& f : stack.frames) {
    if (f.python) {
      if (python.empty()) python = f.file + ':' + std::to_string(f.line) + ' ' + f.function;
      continue;
    }
    if (op.empty()) {
      if (auto node = autograd_node(f.function)) op = *node;
      else if (auto name = aten_operator(f.function)) op = *name;
    }
    // The caching allocator's own frames (libc10_cuda.so, where they are not symbolized here) say nothing.
    const bool allocator = f.function.find("CUDACachingAllocator") != std::string::npos || f.module == "libc10_cuda.so";
    if (native.empty() && !f.in_python_interpreter && !allocator)
      native = shorten_cpp_name(f.function);
  }
  std::string line = python.empty() ? (op.empty() ? native : std::string()) : python;
  if (!op.empty()) line += (line.empty() ? "" : " ") + std::string("[") + op + ']';
  return line.empty() ? std::string("(no stack)") : terminal_safe(line);
}

void print_peak_report(std::ostream& out, const MomentBreakdown& b, const std::vector<UserLineNode>& tree,
                       bool at_time, FrameResolver& resolver, const TextOptions& options) {
  out << "\nDevice " << b.device << ": live " << (at_time ? "at " : "at peak allocated, ")
      << format_seconds(seconds(b.time_ns)) << " (event " << with_thousands(b.event_index) << ")\n";
  out << "  allocated " << format_bytes(b.totals.allocated_bytes) << ", reserved "
      << format_bytes(b.totals.reserved_bytes) << ", driver " << format_bytes(b.totals.driver_bytes) << '\n';
  out << "  Breakdown (" << phases_source_text(b) << moment_phase_text(b) << ")\n";
  const bool phases_known = b.phases_source != IterationSource::kNone;
  for (size_t r = 0; r < kBreakdownRows; ++r) {
    if (!phases_known && !b.rows[r].count) continue;  // without phases only the stack tells a row: see below
    std::string name = breakdown_row_name(BreakdownRow(r));
    out << "    " << name << std::string(name.size() < 20 ? 20 - name.size() : 1, ' ') << format_bytes(b.rows[r].bytes)
        << " in " << count_of(b.rows[r].count, "allocation") << '\n';
    if (BreakdownRow(r) == BreakdownRow::kActivations && b.activations_kept.count)
      out << "      of them kept across iterations " << format_bytes(b.activations_kept.bytes) << " in "
          << count_of(b.activations_kept.count, "allocation") << '\n';
  }
  if (!phases_known) out << "    (parameters, gradients, optimizer state, activations, temporaries: not told without iterations)\n";
  out << "  Beside the allocated total\n";
  print_beside(out, b, "    ");
  print_dominance(out, b, "  ");
  out << "  Live by user line: " << count_of(tree.size(), "line");
  if (tree.size() > options.top) out << " (top " << options.top << " shown)";
  out << '\n';
  for (size_t i = 0; i < tree.size() && i < options.top; ++i) {
    const UserLineNode& node = tree[i];
    out << "    #" << i + 1 << ' ' << format_bytes(node.bytes) << " in " << count_of(node.count, "allocation") << ": ";
    if (node.user_frame)
      out << terminal_safe(node.user_frame->file) << ':' << node.user_frame->line << ' '
          << terminal_safe(node.user_frame->function) << '\n';
    else out << "(no frame of the program's own Python code)\n";
    for (size_t j = 0; j < node.sites.size() && j < options.top; ++j) {
      const CallSite& site = node.sites[j];
      ResolvedStack stack = resolver.resolve(site.stack_id);
      out << "      #" << i + 1 << '.' << j + 1 << ' ' << format_bytes(site.bytes) << " in "
          << count_of(site.count, "allocation") << ": " << call_site_line(stack) << '\n';
      if (options.all_frames) print_site_frames(out, site, resolver, options);
    }
    if (node.sites.size() > options.top)
      out << "      ... " << count_of(node.sites.size() - options.top, "more call site") << '\n';
  }
}

}  // namespace memtrace
