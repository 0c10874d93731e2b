// The page of `memtrace report TRACE -o report.html`: one self-contained HTML file (no network) that draws the
// report's data (report_data.h; docs/report.md says what it holds and what the page shows).
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

namespace memtrace {

// Writes the whole page to `out`: the page and the scripts and styles it uses, inlined, with `data`
// (report_data()) embedded as <script id="memtrace-data" type="application/json">, written by embeddable_json so
// that nothing in it can end the element.
void write_report_html(const nlohmann::json& data, std::ostream& out);

}  // namespace memtrace
