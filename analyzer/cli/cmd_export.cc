// `memtrace export --format FORMAT TRACE... -o FILE`: the trace in a form another tool reads
// (docs/commands/export.md). One row of kFormats per format; each format's writer is its own file in
// analyzer/export/. Every format takes one trace, except sqlite and perfetto, which take many (a directory: every
// *.mtrace in it).
#include <sys/stat.h>

#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/report_session.h"
#include "export/event_csv.h"
#include "export/export_source.h"
#include "export/folded.h"
#include "export/memory_viz.h"
#include "export/perfetto.h"
#include "export/pprof.h"
#include "export/speedscope.h"
#include "export/sqlite_export.h"
#include "fleet/read_many.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

struct ExportFormat {
  const char* name;
  const char* help;
  // Writes the whole export of one trace to `out` (opened in binary mode on FILE). Throws TraceError where the
  // trace no longer reads. nullptr for sqlite, which takes many traces and writes FILE by name (export_sqlite).
  void (*write)(const ExportSource& source, std::ostream& out);
};

constexpr ExportFormat kFormats[] = {
    {"csv", "every event as a CSV row: time, device, API, address, size, stack id", write_event_csv},
    {"memory-viz", "PyTorch's memory_viz snapshot: a pickle, JSON where FILE ends in .json", write_memory_viz},
    {"perfetto", "a Perfetto trace: memory counters per device, OOMs, iterations and NVTX ranges", write_perfetto},
    {"pprof", "a gzip'ed pprof profile of the bytes by stack: in use at the peak, at exit, allocated", write_pprof},
    {"speedscope", "bytes by stack for speedscope: live at each device's peak and at exit, all allocations",
     write_speedscope},
    {"folded", "folded stacks (flamegraph.pl, inferno) of the bytes live at each device's peak allocated",
     write_folded},
    {"sqlite", "one SQLite database of many traces: processes, devices, events, stacks and frames", nullptr},
};

struct ExportArgs {
  std::vector<std::string> traces;  // TRACE... as given: files and directories
  std::optional<std::string> debug_paths;
  std::string format;
  std::string output;
};

const ExportFormat* find_format(const std::string& name) {
  for (const ExportFormat& f : kFormats)
    if (name == f.name) return &f;
  return nullptr;
}

std::string format_names() {
  std::string names;
  for (const ExportFormat& f : kFormats) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

// The traces TRACE... names, in order (fleet/read_many.h: a directory is every *.mtrace file in it, by name; a file
// named twice is read once) into `traces`. Returns kExitOk, or kExitBadInput once the line naming the argument that
// names no trace is printed. One TRACE that is not a directory is taken as it is: the reader says what is wrong
// with it, as for every command of one trace. Throws UsageError for no TRACE or an empty one.
int expand_traces(const std::vector<std::string>& given, std::vector<std::string>* traces) {
  if (given.empty()) throw UsageError("no TRACE file given");
  for (const std::string& path : given)
    if (path.empty()) throw UsageError("the TRACE file name is empty");
  struct stat st {};
  if (given.size() == 1 && !(::stat(given[0].c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    *traces = given;
    return kExitOk;
  }
  try {
    *traces = expand_trace_args(given);
  } catch (const TraceArgError& e) {
    std::cerr << "memtrace: " << e.what() << '\n';  // what() names the path, terminal-safe
    return kExitBadInput;
  }
  return kExitOk;
}

// One trace of many: its analysis, then `add` with it (a database's rows, a Perfetto process). Returns kExitOk, or
// kExitBadInput once the line naming the trace is printed.
int add_trace(const std::string& trace, const ExportArgs& args, const std::function<void(const ExportSource&)>& add) {
  ReportArgs report;
  report.trace = TraceArg{trace, true};
  report.debug_paths = args.debug_paths;
  ReportSession session;
  if (int status = open_report(report, /*with_live_at_peak=*/false, &session); status != kExitOk) return status;
  const Analysis& analysis = *session.analysis;
  FrameResolver& resolver = *session.resolver;
  ExportSource source(analysis, resolver, [&] { return event_phases_of(analysis, resolver); });
  try {
    add(source);
  } catch (const TraceError& e) {
    return report_trace_error(trace, e);
  }
  warn_if_truncated(analysis, "the export");
  return kExitOk;
}

int add_to_database(SqliteExport& database, const std::string& trace, const ExportArgs& args) {
  return add_trace(trace, args, [&](const ExportSource& source) { database.add_trace(source); });
}

// `--format perfetto` of many traces: one process each (export/perfetto.h PerfettoJobWriter), each trace analyzed
// and written in turn, one at a time.
int export_perfetto_job(const ExportArgs& args, const std::vector<std::string>& traces) {
  return write_output_file(args.output, traces, [&](std::ostream& out) {
    PerfettoJobWriter job(out);
    for (const std::string& trace : traces)
      if (int status = add_trace(trace, args, [&](const ExportSource& source) { job.add(source); }); status != kExitOk)
        return status;
    return kExitOk;
  });
}

// `--format sqlite`: every trace into one database, written under a new name and renamed over FILE once complete.
int export_sqlite(const ExportArgs& args, const std::vector<std::string>& traces) {
  return write_output_database(args.output, traces, [&](const std::string& new_file) {
    try {
      SqliteExport database(new_file);
      for (const std::string& trace : traces)
        if (int status = add_to_database(database, trace, args); status != kExitOk) return status;
      database.finish();
    } catch (const SqliteError& e) {
      std::cerr << "memtrace: " << terminal_safe(args.output) << ": cannot write: " << e.what() << '\n';
      return kExitBadInput;
    }
    return kExitOk;
  });
}

int export_trace(const ExportArgs& args) {
  const ExportFormat* format = find_format(args.format);
  if (!format) throw UsageError("unknown --format '" + args.format + "' (formats: " + format_names() + ")");
  if (args.output.empty()) throw UsageError("export needs -o FILE");
  std::vector<std::string> traces;
  if (int status = expand_traces(args.traces, &traces); status != kExitOk) return status;
  if (!format->write) return export_sqlite(args, traces);
  if (traces.size() > 1 && args.format == "perfetto") return export_perfetto_job(args, traces);
  if (traces.size() > 1)
    throw UsageError("--format " + args.format + " takes one trace; sqlite and perfetto take many");
  ReportArgs report;
  report.trace = TraceArg{traces.front(), true};
  report.debug_paths = args.debug_paths;
  ReportSession session;
  if (int status = open_report(report, /*with_live_at_peak=*/true, &session); status != kExitOk) return status;
  const Analysis& analysis = *session.analysis;
  FrameResolver& resolver = *session.resolver;
  ExportSource source(analysis, resolver, [&] { return event_phases_of(analysis, resolver); });
  source.set_output_path(args.output);
  int status = write_output_file(args.output, analysis.path, [&](std::ostream& out) { format->write(source, out); });
  if (status == kExitOk) warn_if_truncated(analysis, "the export");
  return status;
}

}  // namespace

RunCommand add_export(CLI::App& memtrace) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* command =
      memtrace.add_subcommand("export", "the trace in a form another tool reads (docs/commands/export.md)");
  command
      ->add_option("TRACE", args->traces,
                   "the .mtrace files to read, or directories of them (sqlite and perfetto only: many)")
      ->type_name("");  // the name says it
  std::string help = "one of";
  for (const ExportFormat& f : kFormats)
    help += std::string(help == "one of" ? " " : "; ") + f.name + " (" + f.help + ")";
  command->add_option("--format", args->format, help)->required()->type_name("FORMAT");
  command->add_option("-o,--output", args->output, "the file to write")->required()->type_name("FILE");
  command
      ->add_option_function<std::string>(
          "--debug-paths", [args](const std::string& value) { args->debug_paths = value; },
          "find symbol files in these directories too, by build id or by file name")
      ->type_name("DIR[:DIR...]");
  return [args] { return export_trace(*args); };
}

}  // namespace memtrace
