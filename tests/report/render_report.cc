// render_report: wraps a report-data JSON file (docs/report.md) into the report page with write_report_html, so
// that the page's browser test runs on a hand-made fixture (tests/report/sample_report_data.json) as well as on
// `memtrace report`'s output.
//
//   render_report DATA.json OUT.html     exit 0; 2 with one line on stderr where DATA.json is not JSON or OUT.html
//                                        cannot be written
#include <fstream>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "report/html/report_html.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: render_report DATA.json OUT.html\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "render_report: " << argv[1] << ": cannot read\n";
    return 2;
  }
  const nlohmann::json data = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded() || !data.is_object()) {
    std::cerr << "render_report: " << argv[1] << ": not a JSON object\n";
    return 2;
  }
  std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "render_report: " << argv[2] << ": cannot write\n";
    return 2;
  }
  try {
    memtrace::write_report_html(data, out);
  } catch (const std::runtime_error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  out.close();
  if (!out) {
    std::cerr << "render_report: " << argv[2] << ": write failed\n";
    return 2;
  }
  return 0;
}
