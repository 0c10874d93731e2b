// memtrace: the offline analyzer for .mtrace files, and `memtrace run` to record one.
#include <algorithm>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "util/terminal_text.h"

namespace {

constexpr const char* kUsage =
    "usage: memtrace run [-o PATH] -- CMD ARGS...      run CMD with the tracer preloaded\n"
    "       memtrace summary TRACE [--json] [--top N] [--all-frames]\n"
    "       memtrace timeline TRACE --csv|--json [--interval SECONDS]\n"
    "       memtrace leaks TRACE [--json] [--top N] [--all-frames]\n"
    "       memtrace oom TRACE [--json] [--top N] [--all-frames]\n"
    "       (summary, leaks, oom: --debug-paths DIR[:DIR...] finds symbol files there, by build id or file name)\n"
    "       memtrace --version\n"
    "The tracer's settings are MEMTRACE_* environment variables (README.md, Environment variables); by default it\n"
    "writes memtrace-<host>-<pid>.mtrace in the job's working directory (MEMTRACE_OUTPUT, or run's -o PATH).\n";

bool is_help(const std::string& arg) { return arg == "-h" || arg == "--help"; }

// `memtrace CMD --help`: a report command's options are all its own, so --help anywhere asks for help; `run`'s
// end at its CMD, whose own --help must reach it (`memtrace run -- python3 train.py --help`).
bool asks_for_help(const std::string& command, const std::vector<std::string>& args) {
  if (command != "run") return std::any_of(args.begin(), args.end(), is_help);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (is_help(arg)) return true;
    if (arg == "--" || arg.empty() || arg[0] != '-') return false;  // CMD starts here
    if (arg == "-o" || arg == "--output") ++i;                        // its value, whatever it reads
  }
  return false;
}

// What main's last-resort error line names: the trace being read, or the command where there is none (run).
std::string input_name(const std::string& command) {
  const std::string& trace = memtrace::named_trace();
  return memtrace::terminal_safe(trace.empty() ? command : trace);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace memtrace;
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (is_help(command) || command == "help" || asks_for_help(command, args)) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (command == "--version" || command == "version") {
    std::cout << "memtrace " MEMTRACE_VERSION "\n";
    return kExitOk;
  }
  try {
    if (command == "summary") return cmd_summary(args);
    if (command == "timeline") return cmd_timeline(args);
    if (command == "leaks") return cmd_leaks(args);
    if (command == "oom") return cmd_oom(args);
    if (command == "run") return cmd_run(args);
    throw UsageError("unknown command '" + command + "'");
  } catch (const UsageError& e) {
    std::cerr << "memtrace: " << terminal_safe(e.what()) << '\n' << kUsage;
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    std::cerr << "memtrace: " << input_name(command) << ": out of memory while analyzing it\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    // Anything a damaged input gets past the checks: one line naming the file, not a crash.
    std::cerr << "memtrace: " << input_name(command) << ": cannot be analyzed: " << terminal_safe(e.what()) << '\n';
    return kExitBadInput;
  }
}
