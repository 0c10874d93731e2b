// The memtrace command line as CLI11 parses it (cli/command_line.cc): one help for every command, listing each
// option with its description, and one form of error for an unknown option or a missing trace, whatever the command.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "trace_builder.h"

namespace memtrace {
namespace {

using test::MemtraceRun;
using test::run_memtrace_binary;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n') + 1); }

// The help's listing: for each command, the left column of each of its option lines ("--top N"), each checked to
// have a description after it.
std::map<std::string, std::vector<std::string>> options_by_command(const std::string& help) {
  std::map<std::string, std::vector<std::string>> options;
  std::istringstream in(help.substr(help.find("\nSubcommands:\n") + 1));
  std::string line, command;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line != "Subcommands:") command = line;
    if (line.rfind("    ", 0) != 0) continue;  // the option lines are indented by four
    size_t gap = line.find("  ", 4);
    EXPECT_NE(gap, std::string::npos) << "no description: " << line;
    if (gap == std::string::npos) continue;
    EXPECT_NE(line.find_first_not_of(' ', gap), std::string::npos) << "no description: " << line;
    options[command].push_back(line.substr(4, gap - 4));
  }
  return options;
}

TEST(CommandLine, HelpListsEveryOptionOfEveryCommandWithItsDescription) {
  MemtraceRun top = run_memtrace_binary("--help");
  ASSERT_EQ(top.exit_code, 0);
  const std::vector<std::string> report = {"TRACE ...", "--json", "--top N", "--all-frames",
                                           "--debug-paths DIR[:DIR...]"};
  const std::map<std::string, std::vector<std::string>> expected = {
      {"run", {"-o,--output PATH"}},
      {"summary", report},
      {"timeline", {"TRACE ...", "--csv", "--json", "--interval SECONDS"}},
      {"leaks", report},
      {"oom", report},
      {"diff", {"BEFORE", "AFTER", "--json", "--top N", "--all-frames", "--debug-paths DIR[:DIR...]"}},
      {"peak", {"TRACE", "--json", "--top N", "--all-frames", "--debug-paths DIR[:DIR...]", "--at TIME", "--device N"}},
      {"dump", {"TRACE", "--frames"}},
      {"export", {"TRACE ...", "--format FORMAT REQUIRED", "-o,--output FILE REQUIRED", "--debug-paths DIR[:DIR...]"}},
      {"report", {"TRACE ...", "-o,--output FILE REQUIRED", "--debug-paths DIR[:DIR...]"}},
      {"merge", {"SUMMARY ...", "--json", "--top N"}},
      {"attach", {"PID", "-o,--output PATTERN"}},
      {"detach", {"PID"}},
      {"snapshot", {"PID", "-o,--output PATTERN"}},
  };
  EXPECT_EQ(options_by_command(top.out), expected);
  EXPECT_NE(top.out.find("\ndump\n"
                         "  every record of the trace as one JSON object per line, in file order\n"
                         "  Positionals:\n"
                         "    TRACE                       the .mtrace file to read\n"
                         "  Options:\n"
                         "    --frames                    an event with a stack also says how many native and Python "
                         "frames it holds and whether the tracer cut them\n"),
            std::string::npos)
      << top.out;
  EXPECT_NE(top.out.find("\n       memtrace dump TRACE [--frames]\n"), std::string::npos) << top.out;
}

TEST(CommandLine, EveryCommandsHelpIsTheSameText) {
  const std::string help = run_memtrace_binary("--help").out;
  for (const char* args : {"help", "-h", "dump --help", "dump x.mtrace --frames -h", "timeline x.mtrace --csv --help",
                           "leaks --top 3 --help", "summary --help --bogus"}) {
    MemtraceRun r = run_memtrace_binary(args);
    EXPECT_EQ(r.exit_code, 0) << args;
    EXPECT_EQ(r.out, help) << args;
    EXPECT_EQ(r.err, "") << args;
  }
}

TEST(CommandLine, AnUnknownOptionIsOneLineNamingItAndExit1) {
  for (const char* command : {"summary x.mtrace --bogus", "leaks --bogus x.mtrace", "oom x.mtrace --bogus",
                              "timeline x.mtrace --csv --bogus", "dump x.mtrace --bogus", "run --bogus -- true"}) {
    MemtraceRun r = run_memtrace_binary(command);
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_EQ(first_line(r.err), "memtrace: unknown option '--bogus'\n") << command;
    EXPECT_EQ(r.err.substr(r.err.find('\n') + 1).rfind("usage: memtrace run", 0), 0u) << command;  // the synopsis
    EXPECT_EQ(r.out, "") << command;
  }
  MemtraceRun r = run_memtrace_binary("--bogus");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r.err), "memtrace: unknown option '--bogus'\n");
  // An unknown option with a value after the trace, and an argument too many: named in the same words.
  r = run_memtrace_binary("summary x.mtrace --TOP 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r.err), "memtrace: unknown option '--TOP'\n");
  r = run_memtrace_binary("peak x.mtrace y.mtrace");  // summary, leaks and oom take many
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r.err), "memtrace: unexpected argument 'y.mtrace'\n");
  r = run_memtrace_binary("summary x.mtrace -- --json");  // after --, an argument too many, not an option
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r.err), "memtrace: unexpected argument '--json'\n");
  r = run_memtrace_binary("frobnicate x.mtrace");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r.err), "memtrace: unknown command 'frobnicate'\n");
}

TEST(CommandLine, AValueOptionWithoutItsValueIsAUsageError) {
  MemtraceRun r = run_memtrace_binary("summary x.mtrace --top");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r.err), "memtrace: --top needs a value\n");
  r = run_memtrace_binary("run -o");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(first_line(r.err), "memtrace: --output needs a value\n");
}

TEST(CommandLine, NoTraceIsAUsageErrorAndAMissingOneExit2NamingIt) {
  const std::string missing = test::temp_path("no-such.mtrace");
  for (const char* command : {"summary", "leaks", "oom", "timeline --csv", "dump", "dump --frames"}) {
    MemtraceRun r = run_memtrace_binary(command);
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_EQ(first_line(r.err), "memtrace: no TRACE file given\n") << command;
    EXPECT_EQ(r.out, "") << command;

    r = run_memtrace_binary(std::string(command) + " " + missing);
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_EQ(r.err, "memtrace: " + missing + ": cannot open: No such file or directory\n") << command;
    EXPECT_EQ(r.out, "") << command;
  }
}

TEST(CommandLine, ATraceNamedLikeAnOptionFollowsDoubleDash) {
  MemtraceRun r = run_memtrace_binary("dump -- -no-such.mtrace");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memtrace: -no-such.mtrace: cannot open: No such file or directory\n");
}

}  // namespace
}  // namespace memtrace
