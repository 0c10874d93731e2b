// What the commands share on their command lines: the TRACE positional, counts, and the error line of a trace
// that cannot be read.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "util/terminal_text.h"

namespace memtrace {

namespace {
std::string& named_trace_storage() {
  static std::string path;
  return path;
}
}  // namespace

int report_trace_error(const std::string& path, const TraceError& error) {
  // The file name is shown terminal-safe: a trace that travels can arrive under any name.
  std::cerr << "memtrace: " << terminal_safe(path) << ": " << error.what();
  if (error.has_byte_offset() && !error.offset_in_what()) std::cerr << " (at byte " << error.byte_offset() << ")";
  std::cerr << "\n";
  return kExitBadInput;
}

const std::string& named_trace() { return named_trace_storage(); }

void add_trace(CLI::App& command, TraceArg* trace) {
  // Not ->required(): check_trace says what is missing in the project's words, after --help had its turn.
  command
      .add_option_function<std::string>(
          "TRACE",
          [trace](const std::string& path) {
            trace->path = path;
            trace->given = true;
          },
          "the .mtrace file to read")
      ->type_name("");  // the name says it
}

void add_traces(CLI::App& command, TraceArg* first, std::vector<std::string>* all) {
  command
      .add_option_function<std::vector<std::string>>(
          "TRACE",
          [first, all](const std::vector<std::string>& paths) {
            *all = paths;
            if (paths.empty()) return;
            first->path = paths.front();
            first->given = true;
          },
          "the .mtrace files to read, or directories of them (every *.mtrace in each)")
      ->type_name("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

const std::string& check_trace(const TraceArg& trace) {
  if (!trace.given) throw UsageError("no TRACE file given");
  if (trace.path.empty()) throw UsageError("the TRACE file name is empty");
  named_trace_storage() = trace.path;
  return trace.path;
}

size_t parse_count(const std::string& option, const std::string& text) {
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-')
    throw UsageError(option + " needs a non-negative whole number, not '" + text + "'");
  return size_t(value);
}

}  // namespace memtrace
