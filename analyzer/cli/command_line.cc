// run_memtrace: the memtrace command line. Every command is a CLI11 subcommand (declared in its cmd_*.cc); this
// file adds them, parses, prints the help and the errors in one form, and runs the command named.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

// The synopsis: the head of --help, and what follows the error line of a usage error.
constexpr const char* kUsage =
    "usage: memtrace run [-o PATH] -- CMD ARGS...      run CMD with the tracer preloaded\n"
    "       memtrace summary TRACE... [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]\n"
    "       memtrace timeline TRACE... --csv|--json [--interval SECONDS]\n"
    "       memtrace leaks TRACE... [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]\n"
    "       memtrace oom TRACE... [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]\n"
    "       memtrace diff BEFORE AFTER [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]\n"
    "       memtrace peak TRACE [--at TIME] [--device N] [--json] [--top N] [--all-frames] [--debug-paths "
    "DIR[:DIR...]]\n"
    "       memtrace dump TRACE [--frames]\n"
    "       memtrace export --format FORMAT TRACE... -o FILE [--debug-paths DIR[:DIR...]]\n"
    "       memtrace report TRACE... -o FILE [--debug-paths DIR[:DIR...]]\n"
    "       memtrace merge SUMMARY.json... [--json] [--top N]\n"
    "       memtrace attach [-o PATTERN] PID\n"
    "       memtrace detach PID\n"
    "       memtrace snapshot [-o PATTERN] PID\n"
    "       memtrace --version\n"
    "       memtrace --help, memtrace CMD --help    this text\n"
    "The tracer's settings are MEMTRACE_* environment variables (README.md, Environment variables); by default it\n"
    "writes memtrace-<host>-<pid>.mtrace in the job's working directory (MEMTRACE_OUTPUT, or run's -o PATH).\n";

// The commands in the order the synopsis gives them. `program`: run's CMD ARGS... (split_run_args).
std::vector<RunCommand> add_commands(CLI::App& memtrace, std::vector<std::string> program) {
  std::vector<RunCommand> commands;
  commands.push_back(add_run(memtrace, std::move(program)));
  commands.push_back(add_summary(memtrace));
  commands.push_back(add_timeline(memtrace));
  commands.push_back(add_leaks(memtrace));
  commands.push_back(add_oom(memtrace));
  commands.push_back(add_diff(memtrace));
  commands.push_back(add_peak(memtrace));
  commands.push_back(add_dump(memtrace));
  commands.push_back(add_export(memtrace));
  commands.push_back(add_report(memtrace));
  commands.push_back(add_merge(memtrace));
  commands.push_back(add_attach(memtrace));
  commands.push_back(add_detach(memtrace));
  commands.push_back(add_snapshot(memtrace));
  return commands;
}

// `memtrace --help`, and `memtrace CMD --help` for every CMD (the same text: one place lists everything): the
// synopsis, then every command with each of its options and what it does, as CLI11 lists them.
std::string help_text(const CLI::App& memtrace) {
  CLI::Formatter formatter;
  return std::string(kUsage) + formatter.make_subcommands(&memtrace, CLI::AppFormatMode::All);
}

int usage_error(const std::string& what) {
  std::cerr << "memtrace: " << terminal_safe(what) << '\n' << kUsage;
  return kExitUsage;
}

bool is_command(const CLI::App& memtrace, const std::string& name) {
  for (const CLI::App* command : memtrace.get_subcommands({}))
    if (command->get_name() == name) return true;
  return false;
}

// What the last-resort error line names: the trace being read, or the command where there is none (run).
std::string input_name(const std::string& command) {
  const std::string& trace = named_trace();
  return terminal_safe(trace.empty() ? command : trace);
}

// What CLI11 could not place (the app allows extras so that they get our words, not CLI11's list of them): an
// option-looking one is an unknown option unless it came after `--` in `args` (CLI11 hands the extras back out of
// order, with or without the separator), else one is an argument too many (a second TRACE).
void refuse_extras(const CLI::App& memtrace, const std::vector<std::string>& args) {
  std::vector<std::string> extras = memtrace.remaining(true);  // the commands' and memtrace's own
  std::erase(extras, std::string("--"));                       // the separator, when CLI11 keeps it
  if (extras.empty()) return;
  const auto separator = std::find(args.begin(), args.end(), "--");
  for (const std::string& extra : extras) {
    const bool after_separator = separator != args.end() && std::find(separator + 1, args.end(), extra) != args.end();
    if (!after_separator && extra.size() > 1 && extra[0] == '-') throw UsageError("unknown option '" + extra + "'");
  }
  throw UsageError("unexpected argument '" + extras.front() + "'");
}

// CLI11's "--top: 1 required N missing" as "--top needs a value".
std::string missing_value_message(const CLI::ArgumentMismatch& e) {
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  return colon == std::string::npos ? what : what.substr(0, colon) + " needs a value";
}

// The command that `memtrace` parsed: `commands` are add_commands' (in the order of its subcommands).
int run_parsed(const CLI::App& memtrace, const std::vector<RunCommand>& commands,
               const std::vector<std::string>& args) {
  std::vector<const CLI::App*> all = memtrace.get_subcommands({});
  refuse_extras(memtrace, args);
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i]->parsed()) return commands[i]();
  throw UsageError("no command given");  // require_subcommand(1) leaves none unparsed
}

}  // namespace

int run_memtrace(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string& first = args[0];
  if (first == "--version" || first == "version") {
    std::cout << "memtrace " MEMTRACE_VERSION "\n";
    return kExitOk;
  }
  // run's CMD ARGS... never reach CLI11: they are the program's, whatever they look like (--help included).
  std::vector<std::string> cli_args = args, program;
  if (first == "run") {
    RunArgs split = split_run_args(std::vector<std::string>(args.begin() + 1, args.end()));
    program = std::move(split.program);
    cli_args.resize(1);
    cli_args.insert(cli_args.end(), split.options.begin(), split.options.end());
  }
  CLI::App memtrace("memtrace: the offline analyzer for .mtrace files, and `memtrace run` to record one", "memtrace");
  // Set before the commands are added, which take their options' defaults from here: a repeated option's first
  // value counts, as it always did.
  memtrace.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeFirst);
  memtrace.require_subcommand(1);
  memtrace.allow_extras();  // inherited by the commands: refuse_extras names what is left over
  const std::vector<RunCommand> commands = add_commands(memtrace, std::move(program));
  try {
    if (first == "help") throw CLI::CallForHelp();
    if (first != "-h" && first != "--help" && !is_command(memtrace, first))
      throw UsageError((first.empty() || first[0] != '-' ? "unknown command '" : "unknown option '") + first + "'");
    std::reverse(cli_args.begin(), cli_args.end());  // CLI11 takes the arguments last first
    memtrace.parse(cli_args);
    return run_parsed(memtrace, commands, args);
  } catch (const CLI::CallForHelp&) {
    std::cout << help_text(memtrace);
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << help_text(memtrace);
    return kExitOk;
  } catch (const CLI::ArgumentMismatch& e) {
    return usage_error(missing_value_message(e));
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  } catch (const UsageError& e) {
    return usage_error(e.what());
  } catch (const std::bad_alloc&) {
    std::cerr << "memtrace: " << input_name(first) << ": out of memory while analyzing it\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    // Anything a damaged input gets past the checks: one line naming the file, not a crash.
    std::cerr << "memtrace: " << input_name(first) << ": cannot be analyzed: " << terminal_safe(e.what()) << '\n';
    return kExitBadInput;
  }
}

}  // namespace memtrace
