// write_report_html: the template web/report.html, each "<!-- memtrace:inline NAME -->" replaced by the asset NAME
// inside a <style> or <script> element and "<!-- memtrace:data -->" by the report's data.
#include "report/html/report_html.h"

#include <stdexcept>
#include <string>
#include <string_view>

#include "report/html/report_assets.h"

namespace memtrace {
namespace {

constexpr std::string_view kDirectiveOpen = "<!-- memtrace:";
constexpr std::string_view kDirectiveClose = " -->";
constexpr std::string_view kInline = "inline ";
constexpr std::string_view kData = "data";

// The asset called `name`. A name the embedded template uses and the build did not embed is a defect of the build
// (embed_assets.cmake refuses to build such a template), hence logic_error.
const ReportAsset& asset_named(std::string_view name) {
  for (const ReportAsset& asset : report_assets())
    if (asset.name == name) return asset;
  throw std::logic_error("memtrace: report: the page's asset '" + std::string(name) + "' is not built in");
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A script or style element holding the asset. embed_assets.cmake has checked that no script holds "</script"
// or "<!--" and no style "</style", so that the element ends where it should.
void write_inline(const ReportAsset& asset, std::ostream& out) {
  if (ends_with(asset.name, ".css")) {
    out << "<style>\n" << asset.bytes << "\n</style>";
  } else if (ends_with(asset.name, ".js")) {
    out << "<script>\n" << asset.bytes << "\n</script>";
  } else {
    throw std::logic_error("memtrace: report: the page inlines only .css and .js files, not '" +
                           std::string(asset.name) + "'");
  }
}

// The data as JSON inside a script element, every '<' written "\u003c": in JSON a '<' occurs only inside strings,
// where the escape is the same text, and with none left no string can end the element ("</script") or switch
// the HTML parser into the escaped state where "<!--<script" would keep it open past its end tag. Invalid UTF-8
// in a string (a label from a hostile trace) becomes U+FFFD.
void write_data(const nlohmann::json& data, std::ostream& out) {
  const std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out << "<script id=\"memtrace-data\" type=\"application/json\">";
  size_t written = 0;
  for (size_t i = json.find('<'); i != std::string::npos; i = json.find('<', i + 1)) {
    out.write(json.data() + written, static_cast<std::streamsize>(i - written));
    out << "\\u003c";
    written = i + 1;
  }
  out.write(json.data() + written, static_cast<std::streamsize>(json.size() - written));
  out << "</script>";
}

}  // namespace

void write_report_html(const nlohmann::json& data, std::ostream& out) {
  if (const char* missing = report_html_assets_missing()) throw std::runtime_error(missing);
  std::string_view rest = asset_named("report.html").bytes;
  for (size_t open = rest.find(kDirectiveOpen); open != std::string_view::npos; open = rest.find(kDirectiveOpen)) {
    const size_t close = rest.find(kDirectiveClose, open);
    if (close == std::string_view::npos) break;  // not a directive: written as it is
    out << rest.substr(0, open);
    const std::string_view directive = rest.substr(open + kDirectiveOpen.size(), close - open - kDirectiveOpen.size());
    if (directive == kData) {
      write_data(data, out);
    } else if (directive.substr(0, kInline.size()) == kInline) {
      write_inline(asset_named(directive.substr(kInline.size())), out);
    } else {
      throw std::logic_error("memtrace: report: unknown directive in the page template: " + std::string(directive));
    }
    rest = rest.substr(close + kDirectiveClose.size());
  }
  out << rest;
}

}  // namespace memtrace
