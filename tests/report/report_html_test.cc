// write_report_html with the browser assets built in: every directive of the template replaced, the assets
// inlined byte for byte, the data with no '<' left, so that no string ends its script element.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "report/html/report_assets.h"
#include "report/html/report_html.h"

namespace memtrace {
namespace {

std::string page_of(const nlohmann::json& data) {
  std::ostringstream out;
  write_report_html(data, out);
  return out.str();
}

size_t count_of(const std::string& text, std::string_view what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + what.size())) ++n;
  return n;
}

std::string_view asset(std::string_view name) {
  for (const ReportAsset& a : report_assets())
    if (a.name == name) return a.bytes;
  return {};
}

TEST(ReportHtml, AssetsAreBuiltIn) {
  EXPECT_EQ(report_html_assets_missing(), nullptr);
  // The template, web/report.{css,js}, uPlot (script + style), d3, d3-flame-graph (script + style).
  EXPECT_EQ(report_assets().size(), 8u);
  for (const char* name : {"report.html", "report.css", "report.js", "uPlot.iife.min.js", "uPlot.min.css", "d3.min.js",
                           "d3-flamegraph.umd.min.js", "d3-flamegraph.css"})
    EXPECT_FALSE(asset(name).empty()) << name;
}

TEST(ReportHtml, EveryDirectiveIsReplacedAndEveryAssetInlined) {
  const std::string page = page_of(nlohmann::json::object());
  EXPECT_EQ(page.find("<!-- memtrace:"), std::string::npos);
  for (const ReportAsset& a : report_assets()) {
    if (a.name == "report.html") continue;
    EXPECT_NE(page.find(a.bytes), std::string::npos) << a.name << " is not inlined byte for byte";
  }
  // Four inlined scripts (uPlot, d3, d3-flame-graph, report.js) and the data: five script elements, each closed
  // once; three inlined styles.
  EXPECT_EQ(count_of(page, "<script>"), 4u);
  EXPECT_EQ(count_of(page, "<script id=\"memtrace-data\" type=\"application/json\">"), 1u);
  EXPECT_EQ(count_of(page, "</script>"), 5u);
  EXPECT_EQ(count_of(page, "<style>"), 3u);
  EXPECT_EQ(count_of(page, "</style>"), 3u);
  EXPECT_EQ(page.substr(0, 15), "<!DOCTYPE html>");
}

TEST(ReportHtml, DataIsEmbeddedWithNoEndTagInside) {
  nlohmann::json data = {{"format", 1}, {"trace", {{"command", "python a.py </script><!--<script>"}}}};
  const std::string page = page_of(data);
  const std::string element =
      "<script id=\"memtrace-data\" type=\"application/json\">"
      "{\"format\":1,\"trace\":{\"command\":\"python a.py \\u003c/script>\\u003c!--\\u003cscript>\"}}</script>";
  EXPECT_NE(page.find(element), std::string::npos);
  // Parsed back as JSON, the escapes are the same text.
  const size_t begin = page.find("{\"format\"");
  const size_t end = page.find("</script>", begin);
  EXPECT_EQ(nlohmann::json::parse(page.substr(begin, end - begin)), data);
}

TEST(ReportHtml, InvalidUtf8InTheDataBecomesReplacementCharacters) {
  const nlohmann::json data = {{"label", std::string("a\xff"
                                                     "b")}};
  const std::string page = page_of(data);
  EXPECT_NE(page.find("{\"label\":\"a\xEF\xBF\xBD"
                      "b\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace memtrace
