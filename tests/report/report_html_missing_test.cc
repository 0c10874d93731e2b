// write_report_html in a memtrace built without the browser packages (assets_missing.cc): no assets, and the one
// line `memtrace report` prints, which write_report_html throws rather than writing a page.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "report/html/report_assets.h"
#include "report/html/report_html.h"

namespace memtrace {
namespace {

constexpr const char* kLine =
    "memtrace: report: this memtrace was built without the browser packages; run scripts/bootstrap (npm ci in web/) "
    "and rebuild";

TEST(ReportHtmlWithoutAssets, SaysHowToGetThemInOneLine) {
  EXPECT_TRUE(report_assets().empty());
  ASSERT_NE(report_html_assets_missing(), nullptr);
  EXPECT_EQ(std::string(report_html_assets_missing()), kLine);
}

TEST(ReportHtmlWithoutAssets, WritesNothingAndThrowsTheLine) {
  std::ostringstream out;
  try {
    write_report_html(nlohmann::json::object(), out);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), kLine);
  }
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace memtrace
