#include "fleet/summary_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace memtrace {

SummaryFile read_summary_file(const std::string& path) {
  if (std::filesystem::is_directory(path))
    throw std::runtime_error("is a directory: merge reads the files `memtrace summary TRACE --json` wrote");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot be read: ") + std::strerror(errno ? errno : ENOENT));
  // A trace begins with a zstd skippable frame (proto/trace_format.h), whose magic's first byte is 0x50 ('P').
  if (in.peek() == 0x50)
    throw std::runtime_error("a trace, not a summary: merge reads what `memtrace summary TRACE --json` writes");
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 1: ...": the words after the id.
    std::string what = e.what();
    size_t id_end = what.find("] ");
    throw std::runtime_error("not JSON: " + (id_end == std::string::npos ? what : what.substr(id_end + 2)));
  }
  if (!document.is_object() || !document.contains("processes") || !document["processes"].is_array())
    throw std::runtime_error("not a summary --json document: no processes list");
  SummaryFile file;
  std::vector<ProcessSummary>& processes = file.processes;
  const nlohmann::json& entries = document["processes"];
  for (size_t i = 0; i < entries.size(); ++i) {
    try {
      processes.push_back(process_summary_from_json(entries[i]));
    } catch (const std::exception& e) {
      throw std::runtime_error("processes[" + std::to_string(i) + "]: " + e.what());
    }
    if (processes.back().trace.empty()) processes.back().trace = path;
  }
  if (auto it = document.find("unreadable"); it != document.end()) {
    if (!it->is_array()) throw std::runtime_error("its \"unreadable\" is not a list");
    for (size_t i = 0; i < it->size(); ++i) {
      const nlohmann::json& entry = (*it)[i];
      if (!entry.is_object() || !entry.contains("trace") || !entry["trace"].is_string() || !entry.contains("error") ||
          !entry["error"].is_string())
        throw std::runtime_error("unreadable[" + std::to_string(i) + "]: not {trace, error}");
      file.unreadable.emplace_back(entry["trace"].get<std::string>(), entry["error"].get<std::string>());
    }
  }
  return file;
}

}  // namespace memtrace
