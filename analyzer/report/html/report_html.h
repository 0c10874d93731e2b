// The HTML report: one self-contained page (web/report.html with its scripts, styles and the report's data inlined)
// that `memtrace report TRACE -o report.html` writes. The data's shape: docs/report.md.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

namespace memtrace {

// Writes the page for `data` (the report's JSON object) to `out`: the template with its assets inlined and the data
// as <script id="memtrace-data" type="application/json">, every '<' in it written "\u003c" so that nothing in it
// can end the element. Throws std::runtime_error (report_assets.h's one line) where this memtrace was built
// without the browser packages.
void write_report_html(const nlohmann::json& data, std::ostream& out);

}  // namespace memtrace
