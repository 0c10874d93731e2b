#include <algorithm>
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

bool ParsedArgs::has(const std::string& flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

const std::string* ParsedArgs::value(const std::string& option) const {
  for (const auto& [name, value] : values)
    if (name == option) return &value;
  return nullptr;
}

ParsedArgs parse_report_args(const std::vector<std::string>& args, const std::vector<std::string>& flags,
                             const std::vector<std::string>& valued) {
  ParsedArgs parsed;
  bool have_trace = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (std::find(flags.begin(), flags.end(), arg) != flags.end()) {
      parsed.flags.push_back(arg);
    } else if (std::find(valued.begin(), valued.end(), arg) != valued.end()) {
      if (i + 1 == args.size()) throw UsageError(arg + " needs a value");
      parsed.values.emplace_back(arg, args[++i]);
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError("unknown option '" + arg + "'");
    } else if (arg.empty()) {
      throw UsageError("the TRACE file name is empty");  // an unset shell variable, most likely
    } else if (have_trace) {
      throw UsageError("more than one TRACE given ('" + parsed.trace + "', '" + arg + "')");
    } else {
      parsed.trace = arg;
      have_trace = true;
    }
  }
  if (!have_trace) throw UsageError("no TRACE file given");
  named_trace_storage() = parsed.trace;
  return parsed;
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
