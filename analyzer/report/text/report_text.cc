#include "report/text/report_text.h"

#include <algorithm>

#include "read/trace_end.h"
#include "report/text/site_lines.h"
#include "report/text/iterations_text.h"
#include "util/format.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

constexpr const char* kIndent = "      ";

}  // namespace

void print_frames(std::ostream& out, const ResolvedStack& stack, const TextOptions& options) {
  print_call_site_stack(out, stack, options);
}

void print_site_frames(std::ostream& out, const CallSite& site, FrameResolver& resolver, const TextOptions& options) {
  print_frames(out, resolver.resolve(site.stack_id), options);
  if (site.stack_count > 1)
    out << kIndent << "(one call site of " << site.stack_count
        << " stacks that differ only in Python interpreter frames; shown: the one with the most bytes)\n";
}

namespace {

void print_peak(std::ostream& out, const char* name, const Peak& peak) {
  out << "  peak " << name << format_bytes(peak.bytes) << " at " << format_seconds(seconds(peak.time_ns)) << " (event "
      << with_thousands(peak.event_index) << ")\n";
}

std::string last_complete_event(const Analysis& a);

// "arrays 2.00 MiB (peak 8.00 MiB)" for the categories that were ever used, on one line.
void print_categories(std::ostream& out, const DeviceState& d) {
  struct Category {
    const char* name;
    uint64_t final_bytes;
    uint64_t peak_bytes;
  };
  const Category categories[] = {
      {"pools reserved", d.pools_reserved_bytes(), d.peak_pools_reserved.bytes},
      {"graph memory", d.graph_bytes(), d.peak_graph.bytes},
      {"arrays", d.array_bytes, d.peak_array.bytes},
      {"managed (charged to no device)", d.managed_bytes, d.peak_managed.bytes},
      {"imported (not this process's)", d.imported_bytes, d.peak_imported.bytes},
  };
  std::string line;
  for (const Category& c : categories) {
    if (c.peak_bytes == 0) continue;
    line += std::string(line.empty() ? "" : "; ") + c.name + ' ' + format_bytes(c.final_bytes) + " (peak " +
            format_bytes(c.peak_bytes) + ')';
  }
  if (!line.empty()) out << "  " << line << '\n';
}

void print_fragmentation(std::ostream& out, const char* when, const Fragmentation& f) {
  out << "  fragmentation " << when << ": reserved - allocated " << format_bytes(f.reserved_minus_allocated_bytes);
  if (f.segments_known)
    out << ", " << count_of(f.segment_count, "segment") << ", largest free block "
        << format_bytes(f.largest_free_block_bytes);
  else out << " (segments unknown: no PyTorch blocks)";
  out << '\n';
}

// "process 1.49 GiB = accounted 1.00 GiB + context and unattributed 500 MiB; other processes ...".
void print_usage(std::ostream& out, const char* when, const DeviceUsage& u) {
  out << "  device usage " << when << " (" << format_seconds(seconds(u.time_ns)) << "): ";
  if (u.process_used_bytes)
    out << "process " << format_bytes(*u.process_used_bytes) << " = accounted " << format_bytes(u.accounted_bytes)
        << " + context and unattributed " << format_bytes(u.unattributed_bytes());
  else out << "accounted " << format_bytes(u.accounted_bytes) << " (no per-process figure: NVML unavailable)";
  if (u.other_processes_used_bytes) out << "; other processes " << format_bytes(*u.other_processes_used_bytes);
  out << "; device free " << format_bytes(u.device_free_bytes) << " of " << format_bytes(u.device_total_bytes) << '\n';
}

}  // namespace

// "at most 32 native frames (16 on threads with Python frames), deeper ones cut"; without Python frames read
// (TraceStart.python_frames 0: no Python, an unsupported version, MEMTRACE_PYTHON_FRAMES=0) every thread kept the
// first figure, and a limit of 0 is "no native frames".
void print_stack_depths(std::ostream& out, const proto::TraceStart& start) {
  auto depth = [](uint32_t frames) {
    return frames ? "at most " + std::to_string(frames) + " native frames" : std::string("no native frames");
  };
  out << "  stacks:  " << depth(start.max_native_frames());
  if (start.python_frames() != 0) {
    const uint32_t python = start.max_native_frames_python();
    out << " (" << (python ? std::to_string(python) : std::string("none")) << " on threads with Python frames)";
  }
  out << (start.max_native_frames() || start.max_native_frames_python() ? ", deeper ones cut\n" : "\n");
}

namespace {

// "tracer: dormant; layers: driver and PyTorch": how the tracer came to be there and what it saw from attach on.
std::string attach_tracer_words(const Analysis& a) {
  const proto::TraceStart& start = *a.info.start;
  if (start.origin() == proto::TraceStart::ATTACH_DORMANT) return "tracer: dormant";
  if (start.origin() != proto::TraceStart::ATTACH_INJECTED) return "";
  bool cupti_busy = std::any_of(a.info.notices.begin(), a.info.notices.end(),
                                [](const proto::Notice& n) { return n.code() == proto::Notice::CUPTI_BUSY; });
  bool driver = start.driver_layer_attached(), torch = start.torch_layer_attached();
  std::string layers = driver && torch ? "driver and PyTorch"
                       : torch         ? std::string("PyTorch only") + (cupti_busy ? ": CUPTI was busy" : "")
                       : driver        ? "driver only"
                                       : "none";
  return "tracer: loaded into the process; layers: " + layers;
}

}  // namespace

std::string describe_attach(const Analysis& a) {
  if (!began_at_attach(a)) return "";
  const proto::TraceStart& start = *a.info.start;
  bool snapshot = start.origin() == proto::TraceStart::SNAPSHOT;
  std::string line = snapshot ? "Snapshot of the running process's live set" : "Attached to the running process";
  if (start.start_unix_ns()) line += " at " + format_utc(start.start_unix_ns());
  std::string details;
  if (start.attach_number() && !snapshot) details = "attach " + std::to_string(start.attach_number());
  std::string tracer = attach_tracer_words(a);
  if (!tracer.empty()) details += (details.empty() ? "" : "; ") + tracer;
  if (!details.empty()) line += " (" + details + ")";
  const AttachFacts all = sum_attach_facts(a.model.attach_facts());
  // The allocated kind first: blocks where there are any (the driver allocations then hold them), else the driver's.
  const bool blocks = all.blocks_allocated();
  line += ": " + count_of(all.allocated_allocations(), "allocation") + ", " + format_bytes(all.allocated_bytes()) +
          (snapshot ? " live (the peaks are this live set)" : " allocated before attach");
  if (all.unlisted_bytes) line += " (" + format_bytes(all.unlisted_bytes) + " of it in blocks not listed one by one)";
  if (blocks && all.driver_allocations)
    line += "; driver " + count_of(all.driver_allocations, "allocation") + ", " + format_bytes(all.driver_bytes);
  return line;
}

void print_trace_overview(std::ostream& out, const Analysis& a) {
  out << "memtrace: " << terminal_safe(a.path) << '\n';
  if (a.info.start) {
    out << "  process: pid " << a.info.start->pid();
    if (!a.info.start->hostname().empty()) out << " on " << terminal_safe(a.info.start->hostname());
    // No argv: MEMTRACE_REDACT_ARGS, or /proc/self/cmdline could not be read. Said, so that it does not look cut.
    if (a.info.start->argv().empty()) out << " (command line not recorded)";
    else out << ',';
    for (const std::string& arg : a.info.start->argv()) out << ' ' << terminal_safe(arg);
    out << '\n';
    // Where a stack may have been cut: a reader comparing stacks needs to know how deep the tracer went.
    if (a.info.start->has_max_native_frames() && a.info.start->has_max_native_frames_python())
      print_stack_depths(out, *a.info.start);
    // Which interpreter's frames the stacks hold; no line where none were read (a job without Python needs none,
    // and an unsupported version has its notice under trace health).
    if (a.info.start->python_frames() != 0)
      out << "  python:  frames read from CPython " << format_python_version(a.info.start->python_frames()) << '\n';
  }
  if (std::string attach = describe_attach(a); !attach.empty()) out << "  " << terminal_safe(attach) << '\n';
  out << "  events:  " << with_thousands(a.model.health().events) << " in " << count_of(a.read.chunks, "chunk")
      << " over " << format_seconds(seconds(a.duration_ns())) << '\n';
  if (a.read.truncated)
    out << "  TRUNCATED: the writer was cut off; read up to byte " << with_thousands(a.read.complete_bytes) << " of "
        << with_thousands(a.read.file_bytes) << ", last complete event at " << last_complete_event(a) << '\n';
  if (a.read.truncated && !a.read.tail.empty())
    out << "  after byte " << with_thousands(a.read.complete_bytes) << ": " << a.read.tail << '\n';
}

void print_devices(std::ostream& out, const Analysis& a, FrameResolver& resolver, const TextOptions& options,
                   const std::function<void(std::ostream& out, int32_t device)>& at_peak) {
  for (const auto& [device, d] : a.model.devices()) {
    DeviceTotals final_totals = d.totals();
    out << "\nDevice " << device
        << (d.allocator_layer_seen ? " (PyTorch allocator layer seen)"
            : d.block_layer_seen   ? " (pool blocks seen)"
                                   : " (driver level only)")
        << '\n';
    print_peak(out, "allocated ", d.peak_allocated());
    print_peak(out, "reserved  ", d.peak_reserved());
    print_peak(out, "driver    ", d.peak_driver);
    out << "  final allocated " << format_bytes(final_totals.allocated_bytes) << ", reserved "
        << format_bytes(final_totals.reserved_bytes) << ", driver " << format_bytes(final_totals.driver_bytes) << '\n';
    out << "  driver allocations " << with_thousands(d.driver_allocations) << " (" << with_thousands(d.driver_frees)
        << " freed), block allocations " << with_thousands(d.block_allocations) << " (" << with_thousands(d.block_frees)
        << " freed)";
    // What was live at attach is no allocation of the trace's: counted apart, with the frees of it the trace saw.
    if (auto f = a.model.attach_facts().find(device);
        f != a.model.attach_facts().end() && f->second.driver_allocations + f->second.block_allocations > 0)
      out << "; live at attach: driver " << with_thousands(f->second.driver_allocations) << " ("
          << with_thousands(f->second.driver_frees) << " freed), block " << with_thousands(f->second.block_allocations)
          << " (" << with_thousands(f->second.block_frees) << " freed)";
    out << '\n';
    print_categories(out, d);
    if (auto f = a.fragmentation_at_peak.find(device); f != a.fragmentation_at_peak.end())
      print_fragmentation(out, "at peak allocated", f->second);
    if (auto f = a.final_fragmentation.find(device); f != a.final_fragmentation.end())
      print_fragmentation(out, "at end", f->second);
    if (d.peak_usage) print_usage(out, "at peak", *d.peak_usage);
    if (d.last_usage) print_usage(out, "last", *d.last_usage);
    if (d.context_destroys)
      out << "  context destroyed or reset " << count_of(d.context_destroys, "time") << ", freeing "
          << format_bytes(d.context_freed_bytes) << " of allocations with it\n";
    if (at_peak) at_peak(out, device);
    auto peak = a.live_at_peak.find(device);
    if (peak == a.live_at_peak.end() || peak->second.empty()) continue;
    const auto& sites = peak->second;
    out << "  Live at peak allocated: " << count_of(sites.size(), "call site");
    if (sites.size() > options.top) out << " (top " << options.top << " shown)";
    out << '\n';
    for (size_t i = 0; i < sites.size() && i < options.top; ++i) {
      out << "    #" << i + 1 << ' ' << format_bytes(sites[i].bytes) << " in " << count_of(sites[i].count, "allocation")
          << '\n';
      // Allocations made before attach have no stack; so have those the tracer recorded without one.
      if (sites[i].stack_id == 0 && began_at_attach(a)) out << kIndent << kNoStackInAttachedTrace << '\n';
      else print_site_frames(out, sites[i], resolver, options);
    }
  }
}

void print_process(std::ostream& out, const Analysis& a) {
  const ProcessTotals& p = a.model.process_totals();
  if (!p.peak_host_pinned.bytes && !p.peak_host_registered.bytes && !p.peak_address_space_reserved.bytes) return;
  out << "\nHost memory and address space (process-wide, charged to no device)\n";
  auto line = [&](const char* name, uint64_t final_bytes, const Peak& peak) {
    if (!peak.bytes) return;
    out << "  " << name << format_bytes(final_bytes) << " at end, peak " << format_bytes(peak.bytes) << " at "
        << format_seconds(seconds(peak.time_ns)) << '\n';
  };
  line("pinned host             ", p.host_pinned_bytes, p.peak_host_pinned);
  line("registered host         ", p.host_registered_bytes, p.peak_host_registered);
  line("address space reserved  ", p.address_space_reserved_bytes, p.peak_address_space_reserved);
}

namespace {

// "    device 0, PyTorch blocks: allocated before attach, still live: 2 allocations, 3.00 MiB": allocations with no
// call site (made before the tracer recorded stacks), one line per layer and device.
void print_before_attach_live(std::ostream& out, const Analysis& a) {
  for (const BeforeAttachLive& b : a.model.before_attach_live_at_exit()) {
    const DeviceState* state = nullptr;
    if (auto it = a.model.devices().find(b.device); it != a.model.devices().end()) state = &it->second;
    const char* layer = b.layer == proto::LAYER_DRIVER         ? "driver"
                        : state && state->allocator_layer_seen ? "PyTorch blocks"
                                                               : "blocks";
    out << "    device " << b.device << ", " << layer
        << ": allocated before attach, still live: " << count_of(b.allocations, "allocation") << ", "
        << format_bytes(saturating_add(b.bytes, b.unlisted_bytes));
    if (b.unlisted_bytes) out << " (" << format_bytes(b.unlisted_bytes) << " of it in blocks not listed one by one)";
    out << '\n';
  }
}

}  // namespace

void print_leaks(std::ostream& out, const Analysis& a, FrameResolver& resolver, const TextOptions& options,
                 const IterationReport* iterations) {
  if (iterations && iterations->found()) print_leak_groups(out, a, *iterations, resolver, options);
  out << "\nLive at exit (leak candidates, "
      << (a.model.finalizing_time_ns()
              ? "at Python finalization " + format_seconds(seconds(*a.model.finalizing_time_ns()))
              : std::string("at end of trace"))
      << "): " << count_of(a.leaks.size(), "call site");
  if (a.leaks.size() > options.top) out << " (top " << options.top << " shown)";
  out << '\n';
  if (iterations && !iterations->found()) print_leak_groups(out, a, *iterations, resolver, options);
  bool per_iteration = iterations && iterations->found();
  print_before_attach_live(out, a);
  for (size_t i = 0; i < a.leaks.size() && i < options.top; ++i) {
    const LeakSite& l = a.leaks[i];
    out << "    #" << i + 1 << " device " << l.site.device << ": " << format_bytes(l.site.bytes) << " in "
        << count_of(l.site.count, "allocation");
    if (per_iteration) {
      if (uint64_t growth = iterations->leak_growth_per_iteration_bytes[i])
        out << ", GROWS " << format_bytes(growth) << " per iteration";
    } else if (l.growing)
      out << ", GROWS step after step: " << count_of(l.growth_count, "allocation") << " of "
          << format_bytes(l.growth_bytes_per_step) << " each, one every " << format_interval(l.median_interval_s)
          << " (median)";
    out << '\n';
    print_site_frames(out, l.site, resolver, options);
  }
}

void print_ooms(std::ostream& out, const Analysis& a, FrameResolver& resolver, const TextOptions& options) {
  const auto& ooms = a.model.ooms();
  if (ooms.empty()) return;
  out << "\nOut-of-memory events: " << ooms.size();
  if (a.model.health().ooms_not_listed)
    out << " listed, " << with_thousands(a.model.health().ooms_not_listed) << " more only counted";
  out << '\n';
  for (size_t i = 0; i < ooms.size() && i < options.top; ++i) {
    const OomEvent& o = ooms[i];
    out << "    #" << i + 1 << " device " << o.device << " at " << format_seconds(seconds(o.time_ns)) << " ("
        << proto::Api_Name(o.api) << "): requested " << format_bytes(o.requested_bytes) << ", free "
        << format_bytes(o.device_free_bytes) << " of " << format_bytes(o.device_total_bytes);
    if (o.driver_attempts)
      out << " (after " << o.driver_attempts << " failed driver allocation" << (o.driver_attempts > 1 ? "s" : "")
          << ")";
    out << '\n';
    print_frames(out, resolver.resolve(o.stack_id), options);
  }
}

namespace {
// "12.345 s (2026-11-29 17:15:38.123 UTC)"
std::string last_complete_event(const Analysis& a) {
  std::string when = format_seconds(seconds(a.last_event_time_ns));
  if (auto unix_ns = a.last_event_unix_ns()) when += " (" + format_utc(*unix_ns) + ")";
  return when;
}
}  // namespace

namespace {
// ": first after event 1,234 (5.678 s), device 0: <replay_name> 1.00 MiB, <trace_name> 2.00 MiB"
void print_first_mismatch(std::ostream& out, const FigureMismatch& m, const char* replay_name, const char* trace_name) {
  out << ": first after event " << with_thousands(m.event_index) << " (" << format_seconds(seconds(m.time_ns))
      << "), device " << m.device << ": " << replay_name << ' ' << format_bytes(m.replay_bytes) << ", " << trace_name
      << ' ' << format_bytes(m.trace_bytes) << '\n';
}

// The lines of values no tracer writes and of work not done on a hostile trace: each only where non-zero.
void print_hostile_values(std::ostream& out, const TraceHealth& h) {
  if (h.events_with_bad_device)
    out << "  events of a device ordinal outside -1.." << kMaxDeviceOrdinal << " (not replayed) "
        << with_thousands(h.events_with_bad_device) << '\n';
  if (h.implausible_sizes)
    out << "  events with a size or allocator total of 1 PiB or more (beyond any device) "
        << with_thousands(h.implausible_sizes) << '\n';
  if (h.implausible_time_deltas)
    out << "  time steps of more than 100 years " << with_thousands(h.implausible_time_deltas) << '\n';
  if (h.graph_launches_not_replayed)
    out << "  graph launches not replayed (too many graph memory nodes to replay for the trace's size) "
        << with_thousands(h.graph_launches_not_replayed) << '\n';
  if (h.graph_instantiations_not_kept)
    out << "  graph instantiations not kept (too many) " << with_thousands(h.graph_instantiations_not_kept) << '\n';
  if (h.allocated_vs_pytorch.events) {
    out << "  ALLOCATED DIFFERS FROM PYTORCH'S OWN TOTAL at " << count_of(h.allocated_vs_pytorch.events, "event");
    print_first_mismatch(out, h.allocated_vs_pytorch, "memtrace", "PyTorch");
  }
  if (h.allocated_vs_attach_baseline.events) {
    const FigureMismatch& m = h.allocated_vs_attach_baseline;
    out << "  ALLOCATED AT ATTACH DIFFERS FROM PYTORCH'S OWN TOTAL, device " << m.device << ": memtrace "
        << format_bytes(m.replay_bytes) << ", PyTorch " << format_bytes(m.trace_bytes) << '\n';
  }
  if (h.live_at_attach_after_events)
    out << "  allocations live at attach listed after the first event (live from their place in the file) "
        << with_thousands(h.live_at_attach_after_events) << '\n';
  if (h.attach_records_with_bad_device)
    out << "  attach records of a device ordinal outside -1.." << kMaxDeviceOrdinal << " (not applied) "
        << with_thousands(h.attach_records_with_bad_device) << '\n';
  if (h.allocated_above_reserved.events) {
    out << "  ALLOCATED ABOVE RESERVED at " << count_of(h.allocated_above_reserved.events, "PyTorch event");
    print_first_mismatch(out, h.allocated_above_reserved, "allocated", "reserved");
  }
}
}  // namespace

void print_health(std::ostream& out, const Analysis& a, uint64_t modules_not_opened) {
  const TraceHealth& h = a.model.health();
  out << "\nTrace health\n";
  // The header is written when tracing starts, the first records at the first flush: a process cut off
  // before that leaves only the header.
  if (!a.info.start && !a.read.truncated)
    out << "  no records: the process was cut off before the tracer's first flush (MEMTRACE_FLUSH_MS)\n";
  out << "  events read " << with_thousands(h.events) << (a.read.truncated ? ", TRUNCATED" : ", complete") << ", "
      << describe_end(a.info.end) << ", " << (a.read.truncated ? "last complete event at " : "last event at ")
      << last_complete_event(a) << '\n';
  out << "  PyTorch allocator layer: " << (a.allocator_layer_seen() ? "seen" : "not seen") << '\n';
  out << "  unknown frees " << h.unknown_frees << ", double frees " << h.double_frees
      << ", allocations at a live address " << h.duplicate_allocations << ", failed allocations "
      << a.model.failed_allocation_count() << '\n';
  if (h.frees_of_unlisted_before_attach)
    out << "  frees of blocks allocated before attach whose addresses were not listed "
        << with_thousands(h.frees_of_unlisted_before_attach) << " (taken from their total, not unknown)\n";
  if (h.teardown_frees)
    out << "  teardown frees " << with_thousands(h.teardown_frees)
        << " (freed while CUDA was shutting down, counted as freed)\n";
  if (h.unknown_graph_launches)
    out << "  launches of graphs never seen instantiated " << with_thousands(h.unknown_graph_launches) << '\n';
  if (h.graph_nodes_not_kept)
    out << "  graph memory nodes not kept (too many) " << with_thousands(h.graph_nodes_not_kept) << '\n';
  if (h.backward_timestamps) out << "  timestamps going backwards " << with_thousands(h.backward_timestamps) << '\n';
  print_hostile_values(out, h);
  if (a.read.records_with_invalid_text)
    out << "  " << with_thousands(a.read.records_with_invalid_text)
        << " records had text that is not UTF-8 (shown with '?' in its place)\n";
  if (a.info.end && a.info.end->dropped_events())
    out << "  DROPPED EVENTS: " << with_thousands(a.info.end->dropped_events()) << '\n';
  const RecordCuts& cuts = a.stacks.record_cuts();
  if (cuts.stacks_cut)
    out << "  stacks longer than the tracer writes: " << with_thousands(cuts.stacks_cut) << " (cut to "
        << kMaxNativeFramesPerStack << " native + " << kMaxPythonFramesPerStack << " Python frames)\n";
  if (cuts.strings_cut)
    out << "  strings longer than the tracer writes: " << with_thousands(cuts.strings_cut)
        << " (cut, marked \u2026[truncated])\n";
  if (cuts.ids_redefined)
    out << "  stack or Python frame ids defined again: " << with_thousands(cuts.ids_redefined)
        << " (the first definition kept)\n";
  if (modules_not_opened)
    out << "  modules not symbolized (the trace names more than " << with_thousands(kMaxFilesOpened) << " files) "
        << with_thousands(modules_not_opened) << '\n';
  for (const proto::Notice& n : a.info.notices) {
    out << "  notice " << (proto::Notice_Code_Name(n.code()).empty() ? "code " : "") << notice_code_name(n.code());
    if (!n.message().empty()) out << ": " << terminal_safe(n.message());
    if (n.count()) out << " (" << with_thousands(n.count()) << ")";
    out << '\n';
  }
}

}  // namespace memtrace
