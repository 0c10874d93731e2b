// The --json report of many processes (fleet.h's FleetView): `memtrace summary A B C --json`, `merge --json`.
// Keys are a contract with users' scripts (docs/many-processes.md has the schema): `processes`, `gpus`, `ranks`,
// `wrong_devices`, `leaks`; add keys, never rename. Processes are referred to by their index in `processes`.
#pragma once

#include <nlohmann/json.hpp>

#include "fleet/fleet.h"

namespace memtrace {

// {"bytes": N, "unix_ns": T}
nlohmann::json timed_bytes_json(const TimedBytes& value);

// {"first_start_unix_ns", "processes": [process_summary_json + "parent": index|null], "gpus", "ranks",
//  "wrong_devices", "leaks"}. A GPU's "combined" is null where GpuView::combined is unset.
nlohmann::json fleet_json(const FleetView& view);

}  // namespace memtrace
