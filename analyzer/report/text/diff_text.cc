#include "report/text/diff_text.h"

#include "util/format.h"
#include "util/terminal_text.h"

namespace memtrace {

std::string format_bytes_change(int64_t change_bytes) {
  if (change_bytes == 0) return "no change";
  const char sign = change_bytes > 0 ? '+' : '-';
  std::string text = format_bytes(change_bytes > 0 ? uint64_t(change_bytes) : 0 - uint64_t(change_bytes));
  if (size_t paren = text.find('('); paren != std::string::npos) text.insert(paren + 1, 1, sign);
  return sign + text;
}

namespace {

std::string signed_bytes(int64_t bytes) {
  return bytes < 0 ? format_bytes_change(bytes) : format_bytes(uint64_t(bytes));
}

// "  before: PATH (pid 12, python3 train.py)"
void print_trace_line(std::ostream& out, const char* name, const Analysis& a) {
  out << "  " << name << terminal_safe(a.path);
  if (a.info.start) {
    out << " (pid " << a.info.start->pid();
    if (!a.info.start->argv().empty()) out << ',';
    for (const std::string& arg : a.info.start->argv()) out << ' ' << terminal_safe(arg);
    out << ')';
  }
  out << '\n';
}

void print_notes(std::ostream& out, const DiffResult& diff) {
  for (const DiffNote& note : diff_notes(diff)) out << "  note: " << terminal_safe(note.text) << '\n';
  if (diff.iterations_before || diff.iterations_after)
    out << "  iterations: " << diff.iterations_before << " before, " << diff.iterations_after << " after\n";
}

std::string peak_at(const DeviceFigures& d) {
  return format_bytes(d.peak_allocated_bytes) + " at " + format_seconds(seconds(d.peak_allocated_time_ns));
}

void print_categories(std::ostream& out, const std::vector<CategoryChange>& categories) {
  if (categories.empty()) return;
  out << "  at peak allocated, by category:\n";
  // A side without the category: the known side only, and no change (a change from unknown is not one).
  for (const CategoryChange& c : categories) {
    out << "    " << terminal_safe(c.name) << ": "
        << (c.before_bytes ? format_bytes(*c.before_bytes) : std::string("not known before")) << " -> "
        << (c.after_bytes ? format_bytes(*c.after_bytes) : std::string("not known after"));
    if (c.change_bytes) out << ", " << format_bytes_change(*c.change_bytes);
    out << '\n';
  }
}

void print_device(std::ostream& out, const DeviceChange& d) {
  out << "\nDevice " << d.device;
  if (!d.before) out << ": NEW (no events in BEFORE)";
  if (!d.after) out << ": GONE (no events in AFTER)";
  out << '\n';
  out << "  peak allocated " << (d.before ? peak_at(*d.before) : std::string("none")) << " -> "
      << (d.after ? peak_at(*d.after) : std::string("none")) << ": "
      << format_bytes_change(d.peak_allocated_change_bytes) << '\n';
  if (d.growth_per_iteration_change_bytes)
    out << "  growth per iteration " << signed_bytes(*d.before->growth_per_iteration_bytes) << " -> "
        << signed_bytes(*d.after->growth_per_iteration_bytes) << ": "
        << format_bytes_change(*d.growth_per_iteration_change_bytes) << '\n';
  print_categories(out, d.categories);
}

std::string site_side(const std::optional<SiteSide>& side) {
  if (!side) return "none";
  return format_bytes(side->peak_bytes) + " in " + count_of(side->peak_count, "allocation");
}

void print_site(std::ostream& out, size_t number, const SiteChange& c, GrowthMeasure growth, const DiffSide& before,
                const DiffSide& after, const TextOptions& options) {
  out << "    #" << number << " device " << c.device
      << (!c.before  ? ", NEW"
          : !c.after ? ", GONE"
                     : "")
      << ": " << format_bytes_change(c.peak_change_bytes) << " at peak allocated (" << site_side(c.before) << " -> "
      << site_side(c.after) << ")\n";
  const int64_t growth_before = c.before ? c.before->growth_bytes.value_or(0) : 0;
  const int64_t growth_after = c.after ? c.after->growth_bytes.value_or(0) : 0;
  if (c.growth_change_bytes && (growth_before || growth_after))
    out << "      grows " << growth_measure_name(growth) << ": " << signed_bytes(growth_before) << " -> "
        << signed_bytes(growth_after) << ", " << format_bytes_change(*c.growth_change_bytes) << '\n';
  print_site_frames(out, c.shown_site(), c.shown_in_after() ? after.resolver : before.resolver, options);
}

void print_sites(std::ostream& out, const DiffResult& diff, const DiffSide& before, const DiffSide& after,
                 const TextOptions& options) {
  const size_t total = diff.sites.size();
  if (diff.changed_sites == 0) {
    out << "\nNo call site moved: " << count_of(total, "call site")
        << (total ? ", each with the same bytes at peak allocated" : "")
        << (total && diff.growth != GrowthMeasure::kNone ? " and the same growth" : "") << '\n';
    return;
  }
  out << "\nCall sites that moved: " << diff.changed_sites << " of " << total;
  if (diff.changed_sites > options.top) out << " (top " << options.top << " shown)";
  out << ", by change in bytes live at peak allocated";
  if (diff.growth != GrowthMeasure::kNone) out << ", then in growth " << growth_measure_name(diff.growth);
  out << '\n';
  for (size_t i = 0; i < diff.changed_sites && i < options.top; ++i)
    print_site(out, i + 1, diff.sites[i], diff.growth, before, after, options);
}

}  // namespace

void print_diff(std::ostream& out, const DiffSide& before, const DiffSide& after, const DiffResult& diff,
                const TextOptions& options) {
  out << "memtrace diff\n";
  print_trace_line(out, "before: ", before.analysis);
  print_trace_line(out, "after:  ", after.analysis);
  print_notes(out, diff);
  for (const DeviceChange& d : diff.devices) print_device(out, d);
  print_sites(out, diff, before, after, options);
}

}  // namespace memtrace
