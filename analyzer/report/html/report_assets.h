// The browser files the HTML report inlines (web/report.html, report.css, report.js and the pinned npm packages'
// dist files), compiled into the analyzer at build time: report/html/embed_assets.cmake writes their bytes into a
// generated report_assets.cc, or, where web/node_modules is not installed, the build takes assets_missing.cc
// instead (report/html/CMakeLists.txt picks one of the two translation units).
#pragma once

#include <span>
#include <string_view>

namespace memtrace {

struct ReportAsset {
  std::string_view name;   // the file's name as the template's "<!-- memtrace:inline NAME -->" says it
  std::string_view bytes;  // the file's content, exactly
};

// Every asset, the template "report.html" among them; empty where this memtrace was built without them.
std::span<const ReportAsset> report_assets();

// nullptr where the assets are built in; otherwise the one line `memtrace report` prints instead of a page
// (no newline at its end).
const char* report_html_assets_missing();

}  // namespace memtrace
