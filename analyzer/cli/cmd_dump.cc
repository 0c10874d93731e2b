// `memtrace dump TRACE [--frames]`: every record of the trace as one JSON object per line (export/record_dump.h).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "export/record_dump.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

struct DumpArgs {
  TraceArg trace;
  DumpOptions options;
};

int dump(const DumpArgs& args) {
  const std::string& trace = check_trace(args.trace);
  TraceReadSummary read;
  try {
    read = dump_records(trace, args.options, std::cout);
  } catch (const TraceError& e) {
    std::cout.flush();  // the lines before the damage first, then the error
    return report_trace_error(trace, e);
  }
  if (read.truncated)
    std::cerr << "memtrace: " << terminal_safe(trace)
              << ": truncated trace, records up to the last complete chunk (after byte " << read.complete_bytes << ": "
              << read.tail << ")\n";
  return kExitOk;
}

}  // namespace

RunCommand add_dump(CLI::App& memtrace) {
  auto args = std::make_shared<DumpArgs>();
  CLI::App* command =
      memtrace.add_subcommand("dump", "every record of the trace as one JSON object per line, in file order");
  add_trace(*command, &args->trace);
  command->add_flag("--frames", args->options.frames,
                    "an event with a stack also says how many native and Python frames it holds and whether the "
                    "tracer cut them");
  return [args] { return dump(*args); };
}

}  // namespace memtrace
