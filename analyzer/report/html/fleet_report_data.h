// The data of `memtrace report A B C ... -o job.html` and `memtrace report DIR/ -o job.html`: one JSON object that
// the report's page (web/report.js) draws for many processes, laid out as docs/report.md ("The data of many
// processes") says: the processes as a tree (children under their traced parent) with their per-GPU peaks, leaks
// and OOMs; per physical GPU its users with their peaks and when, the memory untraced processes held, and where
// the traces were read the combined timeline (allocated and reserved summed over the processes, each process's
// share, the combined peak with who held what); the ranks side by side (worst, spread, median); the processes
// that allocated on a GPU other than their rank's local device; the leak candidates merged by call site.
//
// A pure function of a FleetView (fleet/fleet.h): no trace is read here, so its size follows the view (the
// combined timelines' points, at most what combine_timelines was asked for, and the processes), not the events.
#pragma once

#include <nlohmann/json.hpp>

#include "fleet/fleet.h"

namespace memtrace {

// The page's data for `fleet`. Wall-clock times (CLOCK_REALTIME ns, beyond JavaScript's exact integers) are
// written as ns since "origin_unix_ns" (FleetView::first_start_unix_ns, the text reports' time zero, itself
// written as a decimal string), null where the view has none (0: the trace had no start record). Every integer
// is clamped to [-(2^53 - 1), 2^53 - 1], as report_data does. Indices that point outside the view (a hand-made
// or hostile view) are written as null, never followed. Never throws.
nlohmann::json fleet_report_data(const FleetView& fleet);

}  // namespace memtrace
