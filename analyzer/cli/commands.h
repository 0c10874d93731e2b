// The memtrace subcommands, one file each. Each takes the arguments after its name and returns the
// process exit code: 0 ok, 1 usage error, 2 bad input (one error line on stderr naming the file).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "read/trace_reader.h"

namespace memtrace {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitBadInput = 2;

// Thrown for a malformed command line; main prints it with the usage text and exits 1.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int cmd_summary(const std::vector<std::string>& args);
int cmd_timeline(const std::vector<std::string>& args);
int cmd_leaks(const std::vector<std::string>& args);
int cmd_oom(const std::vector<std::string>& args);
int cmd_run(const std::vector<std::string>& args);

// Prints `memtrace: <file>: <what is wrong> (at byte N)` and returns kExitBadInput.
int report_trace_error(const std::string& path, const TraceError& error);

// The TRACE that the last parse_report_args call found (empty before one): main's last-resort error line
// names the file with it, for an exception that is not a TraceError (out of memory, say).
const std::string& named_trace();

// Shared option parsing for the report commands: exactly one TRACE plus the flags in `flags`
// (which take no value) and `valued` (which take one). Unknown options are usage errors.
struct ParsedArgs {
  std::string trace;
  std::vector<std::string> flags;
  std::vector<std::pair<std::string, std::string>> values;
  bool has(const std::string& flag) const;
  const std::string* value(const std::string& option) const;
};
ParsedArgs parse_report_args(const std::vector<std::string>& args, const std::vector<std::string>& flags,
                             const std::vector<std::string>& valued);
// Parses a non-negative count such as --top's.
size_t parse_count(const std::string& option, const std::string& text);

}  // namespace memtrace
