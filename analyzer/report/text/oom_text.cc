#include "report/text/oom_text.h"

#include "analysis/oom_diagnosis.h"
#include "util/checked_math.h"
#include "util/format.h"

namespace memtrace {
namespace {

// The DEVICE_USAGE sample: cuMemGetInfo's or NVML's free/total, and NVML's per-process figures when the
// tracer could load NVML.
void print_usage(std::ostream& out, const OomDetail& d) {
  out << "  device sample:     ";
  if (!d.usage) {
    out << "none in the trace up to the failure\n";
    return;
  }
  const DeviceUsage& u = *d.usage;
  if (d.usage_after_oom) out << "right after the failure";
  else
    out << "latest before the failure (" << format_seconds(seconds(saturating_sub(d.oom.time_ns, u.time_ns)))
        << " earlier)";
  out << ": free " << format_bytes(u.device_free_bytes) << " of " << format_bytes(u.device_total_bytes);
  if (u.process_used_bytes && u.other_processes_used_bytes)
    out << "; NVML: this process " << format_bytes(*u.process_used_bytes) << ", other processes "
        << format_bytes(*u.other_processes_used_bytes);
  else out << "; no NVML figures";
  out << '\n';
}

void print_fragmentation(std::ostream& out, const Fragmentation& f) {
  out << "  largest free block inside reserved memory: ";
  if (f.segments_known)
    out << format_bytes(f.largest_free_block_bytes) << " (" << count_of(f.segment_count, "segment") << ")";
  else out << "not known (no allocator segments in the trace)";
  out << "; reserved but unallocated " << format_bytes(f.reserved_minus_allocated_bytes) << '\n';
}

void print_live_sites(std::ostream& out, const OomDetail& d, FrameResolver& resolver, const TextOptions& options) {
  if (!d.call_sites_listed) {
    out << "  live at the failure: call sites not listed (" << kSitesNotListedReason << ")\n";
    return;
  }
  out << "  live at the failure: " << count_of(d.live_site_count, "call site");
  if (d.live_site_count > d.top_live_sites.size()) out << " (top " << d.top_live_sites.size() << " shown)";
  out << '\n';
  for (size_t i = 0; i < d.top_live_sites.size(); ++i) {
    const CallSite& s = d.top_live_sites[i];
    out << "    #" << i + 1 << ' ' << format_bytes(s.bytes) << " in " << count_of(s.count, "allocation") << '\n';
    print_site_frames(out, s, resolver, options);
  }
}

void print_growing_sites(std::ostream& out, const OomDetail& d, FrameResolver& resolver, const TextOptions& options) {
  if (d.growing_sites.empty()) return;
  out << "  grew step after step before the failure: " << count_of(d.growing_site_count, "call site");
  if (d.growing_site_count > d.growing_sites.size()) out << " (top " << d.growing_sites.size() << " shown)";
  out << '\n';
  for (size_t i = 0; i < d.growing_sites.size(); ++i) {
    const LeakSite& l = d.growing_sites[i];
    out << "    #" << i + 1 << ' ' << format_bytes(l.site.bytes) << " in " << count_of(l.growth_count, "allocation")
        << " of " << short_bytes(l.growth_bytes_per_step) << " each, one every " << format_interval(l.median_interval_s)
        << " (median)\n";
    print_site_frames(out, l.site, resolver, options);
  }
}

void print_diagnosis(std::ostream& out, const OomDetail& d) {
  std::vector<OomDiagnosis> diagnoses = diagnose_oom(d);
  out << "  diagnosis:\n";
  if (diagnoses.empty()) out << "    no usual cause matches these figures\n";
  for (size_t i = 0; i < diagnoses.size(); ++i) out << "    " << i + 1 << ". " << diagnoses[i].text << '\n';
}

void print_detail(std::ostream& out, size_t number, const OomDetail& d, FrameResolver& resolver,
                  const TextOptions& options) {
  const OomEvent& o = d.oom;
  out << "\nOOM #" << number << ": device " << o.device << " at " << format_seconds(seconds(o.time_ns)) << ", "
      << proto::Api_Name(o.api) << ": requested " << format_bytes(o.requested_bytes);
  if (o.driver_attempts) out << " (after " << count_of(o.driver_attempts, "failed driver allocation") << ")";
  out << "\n  call site:\n";
  print_frames(out, resolver.resolve(o.stack_id), options);
  out << "  device:            ";
  if (o.device_total_bytes)
    out << "free " << format_bytes(o.device_free_bytes) << " of " << format_bytes(o.device_total_bytes) << '\n';
  else out << "free/total not recorded\n";
  out << "  this process:      allocated " << format_bytes(d.totals.allocated_bytes) << ", reserved "
      << format_bytes(d.totals.reserved_bytes) << ", driver " << format_bytes(d.totals.driver_bytes) << '\n';
  print_usage(out, d);
  print_fragmentation(out, d.fragmentation);
  print_live_sites(out, d, resolver, options);
  print_growing_sites(out, d, resolver, options);
  print_diagnosis(out, d);
}

}  // namespace

void print_oom_report(std::ostream& out, const Analysis& analysis, const OomReport& report, FrameResolver& resolver,
                      const TextOptions& options) {
  print_trace_overview(out, analysis);
  out << "\nFailed allocations: " << with_thousands(report.total);
  if (report.total > report.detailed.size())
    out << " (the first " << report.detailed.size() << " in detail, "
        << with_thousands(report.total - report.detailed.size()) << " more only counted)";
  out << '\n';
  if (size_t n = report.first_without_call_sites(); n < report.detailed.size())
    out << "live call sites not listed for OOMs #" << n + 1 << " and later: " << kSitesNotListedReason << '\n';
  for (size_t i = 0; i < report.detailed.size(); ++i) print_detail(out, i + 1, report.detailed[i], resolver, options);
}

}  // namespace memtrace
