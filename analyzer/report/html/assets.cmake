# The HTML report's page (included by analyzer/CMakeLists.txt): report/html/report_html.cc writes web/report.html
# with web/report.{css,js} and the pinned npm packages' dist files (web/package.json) inlined. Their bytes are
# compiled in at build time: embed_assets.cmake writes them into the generated report_assets.cc. Where
# web/node_modules is not installed (the GPU machine has no network), the analyzer builds with
# report/html/assets_missing.cc instead and `memtrace report` says in one line how to get them.
set(memtrace_web_dir ${PROJECT_SOURCE_DIR}/web)
set(memtrace_report_asset_files
  report.html=${memtrace_web_dir}/report.html
  report.css=${memtrace_web_dir}/report.css
  report.js=${memtrace_web_dir}/report.js
  uPlot.iife.min.js=${memtrace_web_dir}/node_modules/uplot/dist/uPlot.iife.min.js
  uPlot.min.css=${memtrace_web_dir}/node_modules/uplot/dist/uPlot.min.css
  d3.min.js=${memtrace_web_dir}/node_modules/d3/dist/d3.min.js
  d3-flamegraph.umd.min.js=${memtrace_web_dir}/node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js
  d3-flamegraph.css=${memtrace_web_dir}/node_modules/d3-flame-graph/dist/d3-flamegraph.css)

set(memtrace_report_asset_paths "")
set(memtrace_report_assets_found TRUE)
foreach(asset IN LISTS memtrace_report_asset_files)
  string(REGEX REPLACE "^[^=]*=" "" path "${asset}")
  list(APPEND memtrace_report_asset_paths ${path})
  if(NOT EXISTS ${path})
    set(memtrace_report_assets_found FALSE)
  endif()
endforeach()

if(memtrace_report_assets_found)
  set(memtrace_report_assets_cc ${CMAKE_CURRENT_BINARY_DIR}/report_html/report_assets.cc)
  string(JOIN "|" memtrace_report_assets_arg ${memtrace_report_asset_files})
  add_custom_command(OUTPUT ${memtrace_report_assets_cc}
    COMMAND ${CMAKE_COMMAND} -DOUT=${memtrace_report_assets_cc} -DASSETS=${memtrace_report_assets_arg}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/report/html/embed_assets.cmake
    DEPENDS ${memtrace_report_asset_paths} ${CMAKE_CURRENT_SOURCE_DIR}/report/html/embed_assets.cmake
    COMMENT "Inlining the HTML report's browser assets"
    VERBATIM)
  set_property(GLOBAL PROPERTY MEMTRACE_REPORT_ASSETS embedded)
else()
  set(memtrace_report_assets_cc ${CMAKE_CURRENT_SOURCE_DIR}/report/html/assets_missing.cc)
  set_property(GLOBAL PROPERTY MEMTRACE_REPORT_ASSETS missing)
  message(STATUS "web/node_modules not installed: `memtrace report` is built without the browser packages "
                 "(run scripts/bootstrap, or npm ci in web/)")
  # npm ci changes web/'s modification time: the next build configures again and embeds them.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${memtrace_web_dir})
endif()

# The layer memtrace_report_html (the report's data, report_data.cc) is defined above this file's include; the page
# and one of the two assets translation units join it here.
if(TARGET memtrace_report_html)
  get_target_property(memtrace_report_html_sources memtrace_report_html SOURCES)
  if(NOT "report/html/report_html.cc" IN_LIST memtrace_report_html_sources)
    target_sources(memtrace_report_html PRIVATE report/html/report_html.cc)
  endif()
  target_sources(memtrace_report_html PRIVATE ${memtrace_report_assets_cc})
else()
  memtrace_analyzer_layer(memtrace_report_html report/html
    SOURCES report/html/report_html.cc ${memtrace_report_assets_cc}
    DEPENDS memtrace_analysis)
endif()
