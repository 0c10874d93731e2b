// The module map: every loaded ELF object (path, load address, executable range, build id), so that the
// analyzer can symbolize native return addresses offline.
#pragma once
#include <cstddef>
#include <cstdint>

namespace memtrace {

struct ModuleView {
  const char* path;
  uint64_t load_address;  // dlpi_addr: the load bias
  uint64_t start;         // executable PT_LOAD range
  uint64_t end;
  const uint8_t* build_id;
  size_t build_id_size;
};

// Calls `emit` for each loaded object not reported before (by path and load address); one whose `emit` returns
// false (its record could not be written) is not reported, and the next module_map_changed() says true. Runs
// dl_iterate_phdr, so it must not be called with the recorder's lock held.
void module_map_emit_new(bool (*emit)(const ModuleView&, void* ctx), void* ctx);

// True when objects were loaded or unloaded since the last call (cheap: dl_iterate_phdr's counters), or an
// object's record was refused since.
bool module_map_changed();

// Forgets what was reported (a forked child starts a new trace).
void module_map_reset();

}  // namespace memtrace
