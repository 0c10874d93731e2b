// The memtrace command line: one CLI11 subcommand per command, each in its own cmd_*.cc, and run_memtrace(),
// which parses a whole command line (CLI11) and runs the command it names. Exit codes: 0 ok, 1 usage error (one
// line on stderr saying what is wrong, then the usage), 2 bad input (one line on stderr naming the file).
// CLI11 itself is included only by the .cc files: this header declares its App.
#pragma once

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "read/trace_reader.h"

namespace CLI {
class App;
}

namespace memtrace {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitBadInput = 2;

// Thrown for a malformed command line that CLI11 accepts (a bad value, a missing TRACE); printed as CLI11's own
// errors are: `memtrace: <what>` and the usage, exit 1.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `memtrace ARGS...` (`args` without the program's name) in process: parses the command line, runs the
// command on std::cout / std::cerr and returns its exit code. main() is this.
int run_memtrace(const std::vector<std::string>& args);

// What a command does once the command line is parsed; returns the exit code. Throws UsageError for a value
// CLI11 could not check.
using RunCommand = std::function<int()>;

// Each adds its subcommand to `memtrace` (the top-level CLI11 app), with every option and its description,
// bound to state that the returned function reads.
RunCommand add_summary(CLI::App& memtrace);
RunCommand add_timeline(CLI::App& memtrace);
RunCommand add_leaks(CLI::App& memtrace);
RunCommand add_oom(CLI::App& memtrace);
RunCommand add_peak(CLI::App& memtrace);
RunCommand add_dump(CLI::App& memtrace);
RunCommand add_diff(CLI::App& memtrace);
RunCommand add_export(CLI::App& memtrace);
RunCommand add_report(CLI::App& memtrace);
RunCommand add_merge(CLI::App& memtrace);
// `program` is run's CMD ARGS..., split off the command line before CLI11 sees it (split_run_args).
RunCommand add_run(CLI::App& memtrace, std::vector<std::string> program);
// `memtrace attach|detach|snapshot PID` (cmd_attach.cc).
RunCommand add_attach(CLI::App& memtrace);
RunCommand add_detach(CLI::App& memtrace);
RunCommand add_snapshot(CLI::App& memtrace);

// The tracer is installed next to the analyzer: <prefix>/bin/memtrace and <prefix>/lib/libmemtrace.so. Empty when
// /proc/self/exe cannot be read; the file may not exist (the caller says so).
std::filesystem::path tracer_library_path();

// `memtrace run`'s arguments (those after `run`) as its own options and the program with its arguments: the
// program starts after a `--` (dropped) or at the first argument that is not an option (or is empty), whichever
// comes first; the value of -o/--output is never taken for it. The program's arguments are kept untouched, a
// `--help` or `--` among them included.
struct RunArgs {
  std::vector<std::string> options;
  std::vector<std::string> program;
};
RunArgs split_run_args(const std::vector<std::string>& args);

// Prints `memtrace: <file>: <what is wrong> (at byte N)` and returns kExitBadInput.
int report_trace_error(const std::string& path, const TraceError& error);

// The TRACE of the command line last checked by check_trace (empty before one): run_memtrace's last-resort error
// line names the file with it, for an exception that is not a TraceError (out of memory, say).
const std::string& named_trace();

// The TRACE positional of a command that reads one trace: add_trace declares it on `command`; after parsing,
// check_trace throws UsageError when it is missing or empty (an unset shell variable, most likely) and returns it.
struct TraceArg {
  std::string path;
  bool given = false;
};
void add_trace(CLI::App& command, TraceArg* trace);
const std::string& check_trace(const TraceArg& trace);
// TRACE... of a command that reads one trace or many (summary, leaks, oom): every path given, in order, into
// `all`, and the first into `first` (so that check_trace reads as for one).
void add_traces(CLI::App& command, TraceArg* first, std::vector<std::string>* all);

// Parses a non-negative count such as --top's. Throws UsageError naming `option` for anything else.
size_t parse_count(const std::string& option, const std::string& text);

}  // namespace memtrace
