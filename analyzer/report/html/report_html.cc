// A stand-in page: the data embedded and nothing drawn. The page itself (web/report.html, report.css, report.js and
// the packages they use, inlined at build time) replaces this file.
#include "report/html/report_html.h"

#include "report/html/report_data.h"

namespace memtrace {

void write_report_html(const nlohmann::json& data, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memtrace report</title></head><body>"
         "<script id=\"memtrace-data\" type=\"application/json\">"
      << embeddable_json(data) << "</script></body></html>\n";
}

}  // namespace memtrace
