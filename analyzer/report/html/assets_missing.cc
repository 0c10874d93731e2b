// The browser assets of a memtrace built without web/node_modules (report/html/CMakeLists.txt chooses this file
// over the generated report_assets.cc): no assets, and the one line that says how to get them.
#include "report/html/report_assets.h"

namespace memtrace {

std::span<const ReportAsset> report_assets() { return {}; }

const char* report_html_assets_missing() {
  return "memtrace: report: this memtrace was built without the browser packages; run scripts/bootstrap "
         "(npm ci in web/) and rebuild";
}

}  // namespace memtrace
