// The human-readable reports (summary and leaks). A call site's stack reads as site_lines.h says: for a stack with
// Python frames, the Python frames with the user's own lines marked and the native frames folded into one line;
// for a C++ program, its native frames with shortened names; --all-frames lists every frame in full; --json
// always has every frame.
#pragma once
#include <optional>

#include <cstddef>
#include <functional>
#include <ostream>

#include "analysis/analysis.h"
#include "analysis/iteration_report.h"
#include "stacks/frames.h"

namespace memtrace {

struct TextOptions {
  size_t top = 10;  // call sites shown per list
  bool all_frames = false;
  // The native depths the tracer kept (TraceStart.max_native_frames / _python), named where a stack was cut;
  // unset for traces of tracers that did not record them.
  std::optional<uint32_t> max_native_frames;
  std::optional<uint32_t> max_native_frames_python;
};

// One stack, innermost first, one line per entry (indented for a list entry): print_call_site_stack
// (site_lines.h), "(no stack)" for none. Where the tracer cut the stack, a line says where and at which limit.
void print_frames(std::ostream& out, const ResolvedStack& stack, const TextOptions& options);
// A call site's frames (print_frames of CallSite::stack_id), and where it merges stacks that differ only in the
// interpreter's frames (call_sites.h, SiteGrouping), a line saying how many and whose frames these are.
void print_site_frames(std::ostream& out, const CallSite& site, FrameResolver& resolver, const TextOptions& options);
// The trace's header: process, stacks, Python, events; for a trace that began by attach, the attach line
// (describe_attach).
void print_trace_overview(std::ostream& out, const Analysis& analysis);
// For a trace that began by attach or is a snapshot (TraceStart.origin), one line without indent or newline:
// "Attached to the running process at 2026-12-02 15:04:05.000 UTC (attach 2; tracer: dormant): 1,234 allocations,
// 3.20 GiB allocated before attach". Empty for a trace that began at launch (or has no TraceStart).
std::string describe_attach(const Analysis& analysis);
// `at_peak`, where given, prints more lines about a device's peak allocated (the summary's peak breakdown) after
// the device's figures and before what was live there.
void print_devices(std::ostream& out, const Analysis& analysis, FrameResolver& resolver, const TextOptions& options,
                   const std::function<void(std::ostream& out, int32_t device)>& at_peak = {});
// Host memory (pinned, registered) and address space reserved: process-wide; nothing when unused.
void print_process(std::ostream& out, const Analysis& analysis);
// With `iterations` (analysis/iteration_report.h), growth is said per iteration where iterations were found, the
// growing sites rolled up under the user's line first; without them, or where none was found, step after step.
void print_leaks(std::ostream& out, const Analysis& analysis, FrameResolver& resolver, const TextOptions& options,
                 const IterationReport* iterations = nullptr);
void print_ooms(std::ostream& out, const Analysis& analysis, FrameResolver& resolver, const TextOptions& options);
// `modules_not_opened`: Symbolizer::modules_not_opened() once the reports before it are symbolized.
void print_health(std::ostream& out, const Analysis& analysis, uint64_t modules_not_opened = 0);

}  // namespace memtrace
