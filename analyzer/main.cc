// memtrace: the offline analyzer for .mtrace files, and `memtrace run` to record one.
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

namespace {

constexpr const char* kUsage =
    "usage: memtrace run [-o PATH] -- CMD ARGS...      run CMD with the tracer preloaded\n"
    "       memtrace summary TRACE [--json] [--top N] [--all-frames]\n"
    "       memtrace timeline TRACE --csv|--json [--interval SECONDS]\n"
    "       memtrace leaks TRACE [--json] [--top N] [--all-frames]\n"
    "       memtrace oom TRACE [--json] [--top N] [--all-frames]\n"
    "       memtrace --version\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace memtrace;
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "-h" || command == "--help" || command == "help") {
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
    std::cerr << "memtrace: " << e.what() << '\n' << kUsage;
    return kExitUsage;
  } catch (const std::exception& e) {
    // Anything a damaged input gets past the checks: one line, not a crash.
    std::cerr << "memtrace: " << command << ": " << e.what() << '\n';
    return kExitBadInput;
  }
}
