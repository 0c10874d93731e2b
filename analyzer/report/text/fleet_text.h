// The human-readable report of many processes (fleet.h's FleetView: `memtrace summary A B C`, `summary DIR/`,
// `merge`): per GPU the processes that used it with their peaks and when, the sum of their peaks, the combined
// peak where the traces were read, the untraced processes; the ranks side by side; the WRONG DEVICE lines; the
// process tree; the leak candidates merged by call site. Times read as seconds from the earliest start (time 0,
// whose wall-clock time the first line gives). Every string from a trace (host, argv, file, call site, UUID)
// goes through terminal_safe. docs/many-processes.md shows the report.
#pragma once

#include <cstddef>
#include <ostream>

#include "fleet/fleet.h"

namespace memtrace {

// The whole report, the parts below in order. `top`: merged leak sites shown.
void print_fleet(std::ostream& out, const FleetView& view, size_t top);

// "memtrace: 3 processes on 1 host, 2 GPUs; time 0 = 2026-12-02 10:00:00.000 UTC (the earliest start)".
void print_fleet_overview(std::ostream& out, const FleetView& view);
// Per GPU: its processes, the sum-of-peaks bound, the combined peaks (where set), the untraced processes.
void print_fleet_gpus(std::ostream& out, const FleetView& view);
// One row per rank, the worst named, the spread and the median; nothing where no process has a rank.
void print_rank_table(std::ostream& out, const FleetView& view);
// One WRONG DEVICE line per process and device it should not have touched; nothing where there is none.
void print_wrong_devices(std::ostream& out, const FleetView& view);
// Each process with its command line, children indented under their parent.
void print_process_tree(std::ostream& out, const FleetView& view);
// The `top` largest merged leak sites: bytes, allocations, in how many processes and which ranks (or pids).
void print_merged_leaks(std::ostream& out, const FleetView& view, size_t top);

// Each process's own leak candidates (its summary's), briefly: one line per process, then its `top` largest sites
// one line each. For `leaks` of many traces, after the merged ones.
void print_process_leaks(std::ostream& out, const FleetView& view, size_t top);

}  // namespace memtrace
