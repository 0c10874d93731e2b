// The injected tracer's sources (injected_sources.h): CUPTI (cupti_source.h), the c10 hooks' GOT entries
// (got_patch.h) and PyTorch's snapshot (torch_snapshot.h), switched together.
#include "attach/injected_sources.h"

#include <cstdio>

#include "attach/cupti_source.h"
#include "attach/got_patch.h"
#include "attach/torch_snapshot.h"
#include "hooks/c10_hooks.h"

namespace memtrace {
namespace {

GotPatch g_c10_patch;  // control thread only

// The c10 hooks' imports, to our hooks.
size_t patch_c10() {
  const GotTarget targets[] = {{kC10ReportUsageSymbol, c10_report_usage_hook()},
                               {kC10ReportOomSymbol, c10_report_oom_hook()}};
  return got_patch_apply(targets, 2, &g_c10_patch);
}

}  // namespace

bool injected_sources_enable(InjectedSources* out) {
  *out = InjectedSources{};
  char cupti_why[sizeof out->why_not] = {};
  CuptiStart cupti = cupti_source_start(cupti_why, sizeof cupti_why);
  out->driver_layer = cupti == CuptiStart::kOn;
  out->cupti_busy = cupti == CuptiStart::kBusy;
  size_t patched = patch_c10();
  out->torch_layer = patched > 0;
  if (!out->driver_layer) snprintf(out->why_not, sizeof out->why_not, "%s", cupti_why);
  else if (!out->torch_layer)
    snprintf(out->why_not, sizeof out->why_not,
             "no loaded library imports c10::reportMemoryUsageToProfiler: "
             "no PyTorch block layer");
  else if (g_c10_patch.missed)
    snprintf(out->why_not, sizeof out->why_not, "%zu import slots of the c10 hooks could not be patched",
             g_c10_patch.missed);
  return out->driver_layer || out->torch_layer;
}

void injected_sources_disable() {
  cupti_source_stop();
  got_patch_restore(&g_c10_patch);
}

bool injected_live_list(void (*live)(const LiveEntry& entry, void* context),
                        void (*device)(const DeviceBaseline& baseline, void* context),
                        uint64_t (*pool_events)(void* context), void* context, char* why, size_t why_size) {
  return torch_snapshot_list(SnapshotSink{live, device, pool_events, context}, why, why_size);
}

}  // namespace memtrace
