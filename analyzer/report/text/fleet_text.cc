#include "report/text/fleet_text.h"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "util/checked_math.h"
#include "util/format.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

// format_bytes without the exact count in brackets: a fleet line holds several figures (--json has them exact).
std::string bytes_text(uint64_t bytes) {
  std::string text = format_bytes(bytes);
  return text.substr(0, text.find(" ("));
}

// "1 process", "2 processes" (count_of would add a bare "s").
std::string processes_text(size_t count) { return with_thousands(count) + (count == 1 ? " process" : " processes"); }

// "+2.500 s" from time 0; "an unknown time" where the trace had no start record.
std::string when(const FleetView& view, uint64_t unix_ns) {
  if (!unix_ns || !view.first_start_unix_ns) return "an unknown time";
  return "+" + format_seconds(double(unix_ns - std::min(unix_ns, view.first_start_unix_ns)) / 1e9);
}

// "rank 1 (pid 4242)", "pid 4243"; a child that inherited its traced parent's rank (a DataLoader worker, a process
// it spawned: RANK is in their environment too) is not that rank: "pid 4244 (child of rank 1)".
std::string label(const FleetView& view, size_t index) {
  const ProcessSummary& p = view.processes[index];
  const std::string pid = "pid " + std::to_string(p.pid);
  if (!p.rank) return pid;
  const std::optional<size_t> parent = index < view.parent.size() ? view.parent[index] : std::nullopt;
  if (parent && view.processes[*parent].rank == p.rank) return pid + " (child of rank " + std::to_string(*p.rank) + ")";
  return "rank " + std::to_string(*p.rank) + " (" + pid + ")";
}

// "GPU-0f3c... on node1 (NVIDIA H200, 140.00 GiB)"; for a GPU without UUID "device 0 of node1 (no UUID recorded)".
std::string gpu_title(const GpuView& gpu) {
  std::string title = gpu.gpu.empty()
                          ? "device " + std::to_string(gpu.ordinal) + " of " + terminal_safe(gpu.host) + " (no UUID)"
                          : terminal_safe(gpu.gpu) + " on " + terminal_safe(gpu.host);
  std::string about = terminal_safe(gpu.name);
  if (gpu.total_bytes) about += (about.empty() ? "" : ", ") + bytes_text(gpu.total_bytes);
  return about.empty() ? title : title + " (" + about + ")";
}

void print_user(std::ostream& out, const FleetView& view, const GpuView& gpu, const GpuUser& user) {
  const ProcessSummary& p = view.processes[user.process];
  out << "  " << label(view, user.process);
  if (p.host != gpu.host) out << " on " << terminal_safe(p.host);
  out << " as device " << user.ordinal << ": peak allocated " << bytes_text(user.peak_allocated.bytes) << " at "
      << when(view, user.peak_allocated.unix_ns) << ", peak reserved " << bytes_text(user.peak_reserved.bytes) << " at "
      << when(view, user.peak_reserved.unix_ns) << '\n';
}

// "combined peak allocated 3.50 GiB at +2.000 s: rank 0 (pid 100) 3.00 GiB, rank 1 (pid 101) 512.00 MiB": the
// members are the GPU's users, in their order (the caller combines them so).
void print_combined_moment(std::ostream& out, const FleetView& view, const GpuView& gpu, const char* what,
                           const CombinedMoment& moment, bool allocated) {
  out << "  combined peak " << what << ' ' << bytes_text(allocated ? moment.allocated_bytes : moment.reserved_bytes)
      << " at " << when(view, moment.unix_ns);
  const std::vector<uint64_t>& shares = allocated ? moment.member_allocated_bytes : moment.member_reserved_bytes;
  const char* separator = ": ";
  for (size_t i = 0; i < shares.size() && i < gpu.users.size(); ++i) {
    if (!shares[i]) continue;
    out << separator << label(view, gpu.users[i].process) << ' ' << bytes_text(shares[i]);
    separator = ", ";
  }
  out << '\n';
}

std::string pid_list(const std::vector<uint32_t>& pids) {
  std::string text;
  for (uint32_t pid : pids) text += (text.empty() ? "" : ", ") + std::to_string(pid);
  return text;
}

void print_untraced(std::ostream& out, const FleetView& view, const UntracedMemory& u) {
  out << "  untraced processes: ";
  if (u.bytes)
    out << bytes_text(u.bytes) << " at " << when(view, u.unix_ns) << " (NVML, seen by " << label(view, u.seen_by)
        << ")";
  else out << "no memory beyond the traced processes' in the samples";
  out << (u.pids.empty() ? "; pids not recorded" : "; pids " + pid_list(u.pids)) << '\n';
}

void print_gpu(std::ostream& out, const FleetView& view, const GpuView& gpu) {
  out << "\nGPU " << gpu_title(gpu) << ": " << processes_text(gpu.users.size()) << '\n';
  for (const GpuUser& user : gpu.users) print_user(out, view, gpu, user);
  if (gpu.users.size() > 1)
    out << "  sum of their peaks: allocated " << bytes_text(gpu.sum_of_peak_allocated_bytes) << ", reserved "
        << bytes_text(gpu.sum_of_peak_reserved_bytes) << " (a bound: the peaks need not coincide)\n";
  if (gpu.combined) {
    print_combined_moment(out, view, gpu, "allocated", gpu.combined->peak_allocated, true);
    print_combined_moment(out, view, gpu, "reserved", gpu.combined->peak_reserved, false);
  }
  if (gpu.untraced) print_untraced(out, view, *gpu.untraced);
}

std::string padded(const std::string& text, size_t width) {
  return text.size() >= width ? text + ' ' : text + std::string(width - text.size(), ' ');
}

void print_rank_row(std::ostream& out, const FleetView& view, const RankRow& row, bool worst) {
  const ProcessSummary& p = view.processes[row.process];
  std::string device = row.ordinal < 0 ? "-" : std::to_string(row.ordinal);
  out << "  " << padded(std::to_string(row.rank), 6) << padded(std::to_string(p.pid), 9)
      << padded(terminal_safe(p.host), 12) << padded(device, 8) << padded(bytes_text(row.peak_allocated.bytes), 12)
      << padded(when(view, row.peak_allocated.unix_ns), 12) << padded(bytes_text(row.peak_reserved.bytes), 12)
      << padded(when(view, row.peak_reserved.unix_ns), 12) << padded(bytes_text(row.leaked_bytes), 12) << row.ooms
      << (worst ? "  <- worst" : "") << '\n';
}

// A process's place in the tree: how deep it is (its parent sorts before it, fleet.h) and its children.
struct Tree {
  std::vector<std::vector<size_t>> children;
  std::vector<size_t> roots;
};

Tree process_tree(const FleetView& view) {
  Tree tree;
  tree.children.resize(view.processes.size());
  for (size_t i = 0; i < view.processes.size(); ++i) {
    if (i < view.parent.size() && view.parent[i] && *view.parent[i] < i) tree.children[*view.parent[i]].push_back(i);
    else tree.roots.push_back(i);
  }
  return tree;
}

// "(began at attach 2, +1.000 s: 3.00 MiB (3,145,728 B) allocated before attach)", "(a snapshot of its live set at
// +1.000 s: ... live)": the trace holds the process from then on only, with what was live before as one figure.
std::string attach_words(const FleetView& view, const ProcessAttach& attach) {
  const std::string bytes = count_of(attach.allocations, "allocation") + ", " + format_bytes(attach.bytes);
  if (attach.origin == "SNAPSHOT")
    return "(a snapshot of its live set at " + when(view, attach.unix_ns) + ": " + bytes + " live)";
  return "(began at attach " + std::to_string(attach.attach_number) + ", " + when(view, attach.unix_ns) + ": " + bytes +
         " allocated before attach)";
}

constexpr size_t kMaxTreeIndent = 16;  // levels indented; deeper ones (a chain of forks) stay at this depth

void print_tree_line(std::ostream& out, const FleetView& view, size_t i, size_t depth) {
  const ProcessSummary& p = view.processes[i];
  out << std::string(2 + 2 * std::min(depth, kMaxTreeIndent), ' ') << label(view, i) << " on " << terminal_safe(p.host)
      << ", " << when(view, p.start_unix_ns) << " to " << when(view, p.end_unix_ns) << ':';
  if (p.argv.empty()) out << " (command line not recorded)";
  for (const std::string& arg : p.argv) out << ' ' << terminal_safe(arg);
  out << "  [" << terminal_safe(p.trace) << ']' << (p.truncated ? " (trace truncated)" : "");
  if (p.attach) out << ' ' << attach_words(view, *p.attach);
  // Every process's OOMs are named here, a process without a rank's too (the rank table has the ranks').
  uint64_t ooms = 0;
  for (const ProcessDevice& d : p.devices) ooms = saturating_add(ooms, d.ooms);
  if (ooms) out << "  " << with_thousands(ooms) << (ooms == 1 ? " OOM" : " OOMs");
  out << '\n';
}

// "(ranks 0, 1; pid 400)": the ranks of the processes that have one, the pids of the others, 8 of each at most.
std::string who(const FleetView& view, const std::vector<size_t>& processes) {
  constexpr size_t kListed = 8;
  std::vector<std::string> ranks, pids;
  for (size_t i : processes) {
    const ProcessSummary& p = view.processes[i];
    std::vector<std::string>& list = p.rank ? ranks : pids;
    if (list.size() < kListed) list.push_back(std::to_string(p.rank ? *p.rank : p.pid));
    else if (list.size() == kListed) list.push_back("...");
  }
  auto join = [](const char* one, const char* many, const std::vector<std::string>& list) {
    std::string text = list.size() == 1 ? one : many;
    for (size_t i = 0; i < list.size(); ++i) text += (i ? ", " : " ") + list[i];
    return text;
  };
  std::string text;
  if (!ranks.empty()) text = join("rank", "ranks", ranks);
  if (!pids.empty()) text += (text.empty() ? "" : "; ") + join("pid", "pids", pids);
  return text;
}

}  // namespace

void print_fleet_overview(std::ostream& out, const FleetView& view) {
  std::set<std::string> hosts;
  for (const ProcessSummary& p : view.processes) hosts.insert(p.host);
  out << "memtrace: " << processes_text(view.processes.size()) << " on " << count_of(hosts.size(), "host") << ", "
      << count_of(view.gpus.size(), "GPU");
  if (view.first_start_unix_ns)
    out << "; time 0 = " << format_utc(view.first_start_unix_ns) << " (the earliest start)\n";
  else out << "; no start times recorded\n";
  if (view.duplicates.empty()) return;
  out << "  counted once: " << count_of(view.duplicates.size(), "input")
      << " of a process already read (the same host, pid and start):";
  for (const std::string& trace : view.duplicates) out << ' ' << terminal_safe(trace);
  out << '\n';
}

void print_fleet_gpus(std::ostream& out, const FleetView& view) {
  for (const GpuView& gpu : view.gpus) print_gpu(out, view, gpu);
}

void print_rank_table(std::ostream& out, const FleetView& view) {
  const RankTable& t = view.ranks;
  if (t.rows.empty()) return;
  out << "\nRanks: " << t.rows.size();
  if (t.worst) out << ", worst " << label(view, t.rows[*t.worst].process);
  out << "; peak allocated spread " << bytes_text(t.peak_allocated_spread_bytes) << ", median "
      << bytes_text(t.median_peak_allocated_bytes) << "; peak reserved spread "
      << bytes_text(t.peak_reserved_spread_bytes) << '\n';
  out << "  " << padded("rank", 6) << padded("pid", 9) << padded("host", 12) << padded("device", 8)
      << padded("allocated", 12) << padded("at", 12) << padded("reserved", 12) << padded("at", 12)
      << padded("leaked", 12) << "OOMs\n";
  for (size_t i = 0; i < t.rows.size(); ++i) print_rank_row(out, view, t.rows[i], t.worst && *t.worst == i);
}

void print_wrong_devices(std::ostream& out, const FleetView& view) {
  if (view.wrong_devices.empty()) return;
  out << '\n';
  for (const WrongDevice& w : view.wrong_devices) {
    const ProcessSummary& p = view.processes[w.process];
    out << "WRONG DEVICE: " << label(view, w.process) << " allocated " << bytes_text(w.peak_allocated_bytes)
        << " on GPU " << w.ordinal;
    if (!w.gpu.empty()) out << " (" << terminal_safe(w.gpu) << ')';
    out << ", not its local device " << w.local_ordinal << ": first at "
        << (w.first_allocation_site.empty() ? std::string("(no call site recorded)")
                                            : terminal_safe(w.first_allocation_site))
        << " (" << when(view, w.first_allocation_unix_ns) << ")\n";
  }
}

void print_process_tree(std::ostream& out, const FleetView& view) {
  out << "\nProcesses: " << view.processes.size() << " (children under their parent)\n";
  Tree tree = process_tree(view);
  // Depth first with an explicit stack: a chain of forks can be as deep as there are processes.
  std::vector<std::pair<size_t, size_t>> stack;  // (process, depth)
  for (auto root = tree.roots.rbegin(); root != tree.roots.rend(); ++root) stack.emplace_back(*root, 0);
  while (!stack.empty()) {
    auto [i, depth] = stack.back();
    stack.pop_back();
    print_tree_line(out, view, i, depth);
    for (auto child = tree.children[i].rbegin(); child != tree.children[i].rend(); ++child)
      stack.emplace_back(*child, depth + 1);
  }
}

void print_merged_leaks(std::ostream& out, const FleetView& view, size_t top) {
  out << "\nLeak candidates merged by call site: " << count_of(view.leaks.size(), "site");
  if (view.leaks.size() > top) out << " (top " << top << " shown)";
  out << '\n';
  for (size_t i = 0; i < view.leaks.size() && i < top; ++i) {
    const MergedLeak& l = view.leaks[i];
    out << "  #" << i + 1 << ' ' << bytes_text(l.bytes) << " in " << count_of(l.count, "allocation") << " at "
        << (l.site.empty() ? std::string("(no stack)") : terminal_safe(l.site)) << ": "
        << processes_text(l.processes.size()) << " (" << who(view, l.processes) << ")\n";
  }
}

void print_process_leaks(std::ostream& out, const FleetView& view, size_t top) {
  out << "\nLeak candidates per process\n";
  for (size_t i = 0; i < view.processes.size(); ++i) {
    const ProcessSummary& p = view.processes[i];
    out << "  " << label(view, i) << " [" << terminal_safe(p.trace) << "]: ";
    if (p.leak_sites == 0) {
      out << "none\n";
      continue;
    }
    out << bytes_text(p.leaked_bytes) << " at " << count_of(p.leak_sites, "site");
    if (p.leak_sites > top && top < p.leaks.size()) out << " (top " << top << " shown)";
    out << '\n';
    for (size_t i = 0; i < p.leaks.size() && i < top; ++i)
      out << "    " << bytes_text(p.leaks[i].bytes) << " in " << count_of(p.leaks[i].count, "allocation") << " at "
          << (p.leaks[i].site.empty() ? std::string("(no stack)") : terminal_safe(p.leaks[i].site)) << '\n';
  }
}

void print_fleet(std::ostream& out, const FleetView& view, size_t top) {
  print_fleet_overview(out, view);
  print_fleet_gpus(out, view);
  print_rank_table(out, view);
  print_wrong_devices(out, view);
  print_process_tree(out, view);
  print_merged_leaks(out, view, top);
}

}  // namespace memtrace
