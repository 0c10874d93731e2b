// The human-readable `memtrace oom` report: per failed allocation, its facts (request, call site, device
// free/total, this process's totals, the NVML sample, fragmentation), the call sites live at the failure,
// those that grew up to it, and the diagnosis (oom_diagnosis.h).
#pragma once

#include <ostream>

#include "analysis/oom_report.h"
#include "report/text/report_text.h"

namespace memtrace {

void print_oom_report(std::ostream& out, const Analysis& analysis, const OomReport& report, FrameResolver& resolver,
                      const TextOptions& options);

}  // namespace memtrace
