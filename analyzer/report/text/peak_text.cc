#include "report/text/peak_text.h"

#include <cstdio>
#include <string>

#include "report/text/site_lines.h"
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

// "N MiB of these blocks have native frames not symbolized on this machine: ...", where some have.
void print_unsymbolized(std::ostream& out, const MomentBreakdown& b, const char* indent) {
  const ByteCount unsymbolized = b.unsymbolized_total();
  if (!unsymbolized.count) return;
  out << indent << "of these, " << format_bytes(unsymbolized.bytes) << " in "
      << count_of(unsymbolized.count, "allocation")
      << " have native frames not symbolized on this machine: library workspaces among them cannot be told apart "
         "(analyze where the trace was recorded, or give --debug-paths)\n";
}

// The advice for a dominating share, for a training loop (a backward or optimizer phase seen) or a loop without
// one (inference).
std::string dominance_advice(const MomentBreakdown& b, PeakDominance d) {
  if (d == PeakDominance::kModelState)
    return b.training_seen ? "Smaller batches will not lower it much: shard them across GPUs (FSDP, DeepSpeed ZeRO), "
                             "or keep a smaller optimizer state."
                           : "Smaller batches will not lower it much: load the weights in lower precision (bf16/fp16), "
                             "or split the model across GPUs.";
  if (b.training_seen)
    return "To lower it: smaller micro-batches with gradient accumulation, mixed precision (autocast to bf16/fp16), "
           "activation checkpointing (torch.utils.checkpoint).";
  std::string advice = "The loop has no backward (inference): to lower it, smaller batches, lower precision (bf16/fp16).";
  const ByteCount& activations = b.row(BreakdownRow::kActivations);
  if (b.activations_kept.bytes > activations.bytes / 2)
    advice += " Most of them (" + format_bytes(b.activations_kept.bytes) +
              ") are kept across iterations, which no backward frees: the loop holds outputs with their autograd "
              "graph (the kept-graph trap says how to drop it: torch.inference_mode()).";
  return advice;
}

const char* dominance_title(PeakDominance d) {
  return d == PeakDominance::kActivations ? "ACTIVATIONS" : "PARAMETERS, GRADIENTS AND OPTIMIZER STATE";
}

const char* dominance_name(PeakDominance d) {
  return d == PeakDominance::kActivations ? "activations" : "parameters, gradients and optimizer state";
}

// The dominance line: a verdict that holds whatever the blocks not symbolized are, or why none is given.
void print_dominance(std::ostream& out, const MomentBreakdown& b, const char* indent) {
  const uint64_t allocated = b.totals.allocated_bytes;
  if (PeakDominance d = peak_dominance(b); d != PeakDominance::kNone) {
    const uint64_t share = dominance_share_bytes(b, d, true), sure = dominance_share_bytes(b, d, false);
    out << indent << "PEAK DOMINATED BY " << dominance_title(d) << ": " << percent_of(share, allocated)
        << "% of allocated";
    if (sure != share) out << " (" << percent_of(sure, allocated) << "% without the blocks not symbolized)";
    out << ". " << dominance_advice(b, d) << '\n';
    return;
  }
  if (PeakDominance d = uncertain_dominance(b); d != PeakDominance::kNone)
    out << indent << "DOMINANCE UNCERTAIN: " << dominance_name(d) << " are "
        << percent_of(dominance_share_bytes(b, d, true), allocated) << "% of allocated, but "
        << format_bytes(dominance_share_bytes(b, d, true) - dominance_share_bytes(b, d, false))
        << " of them have native frames not symbolized on this machine, library workspaces perhaps ("
        << percent_of(dominance_share_bytes(b, d, false), allocated) << "% of allocated without them)\n";
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
  print_unsymbolized(out, b, inner.c_str());
  print_beside(out, b, inner.c_str());
  print_dominance(out, b, inner.c_str());
}

std::string format_moment_seconds(int64_t time_ns) {
  char text[40];
  std::snprintf(text, sizeof text, "%.6f s", seconds(time_ns));
  return text;
}

std::string call_site_line(const ResolvedStack& stack) {
  std::string python, op, native;
  for (const Frame& f : stack.frames) {
    if (f.python) {
      if (python.empty())
        python = std::string(python_display_path(f.file)) + ':' + std::to_string(f.line) + ' ' + f.function;
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
  return line.empty() ? std::string(kNoStack) : terminal_safe(line);
}

void print_peak_report(std::ostream& out, const MomentBreakdown& b, const std::vector<UserLineNode>& tree, bool at_time,
                       bool began_at_attach, FrameResolver& resolver, const TextOptions& options) {
  out << "\nDevice " << b.device << ": live " << (at_time ? "at " : "at peak allocated, ")
      << format_moment_seconds(b.time_ns) << " (event " << with_thousands(b.event_index) << ")\n";
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
  print_unsymbolized(out, b, "    ");
  out << "  Beside the allocated total\n";
  print_beside(out, b, "    ");
  print_dominance(out, b, "  ");
  out << "  Live by user line: " << count_of(tree.size(), "line");
  if (tree.size() > options.top) out << " (top " << options.top << " shown)";
  out << '\n';
  for (size_t i = 0; i < tree.size() && i < options.top; ++i) {
    const UserLineNode& node = tree[i];
    const std::string user_line =
        node.user_frame ? terminal_safe(std::string(python_display_path(node.user_frame->file)) + ':' +
                                        std::to_string(node.user_frame->line) + ' ' + node.user_frame->function)
                        : std::string("(no frame of the program's own Python code)");
    out << "    #" << i + 1 << ' ' << format_bytes(node.bytes) << " in " << count_of(node.count, "allocation") << ": "
        << user_line << '\n';
    // A single site whose line is the user line itself (allocated right there) adds nothing but its frames.
    if (node.sites.size() == 1 && !options.all_frames &&
        call_site_line(resolver.resolve(node.sites[0].stack_id)) == user_line)
      continue;
    for (size_t j = 0; j < node.sites.size() && j < options.top; ++j) {
      const CallSite& site = node.sites[j];
      ResolvedStack stack = resolver.resolve(site.stack_id);
      out << "      #" << i + 1 << '.' << j + 1 << ' ' << format_bytes(site.bytes) << " in "
          << count_of(site.count, "allocation") << ": "
          << (site.stack_id == 0 && began_at_attach ? std::string(kNoStackInAttachedTrace) : call_site_line(stack))
          << '\n';
      if (options.all_frames) print_site_frames(out, site, resolver, options);
    }
    if (node.sites.size() > options.top)
      out << "      ... " << count_of(node.sites.size() - options.top, "more call site") << '\n';
  }
}

}  // namespace memtrace
