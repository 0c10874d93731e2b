// `memtrace export --format FORMAT TRACE -o FILE`: the trace in a form another tool reads (docs/commands/export.md).
// One row of kFormats per format; each format's writer is its own file in analyzer/export/.
#include <memory>
#include <string>

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

namespace memtrace {
namespace {

struct ExportFormat {
  const char* name;
  const char* help;
  // Writes the whole export to `out` (opened in binary mode on FILE). Throws TraceError where the trace no
  // longer reads.
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
};

struct ExportArgs {
  ReportArgs report;  // TRACE and --debug-paths (the other report options are not offered)
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

int export_trace(const ExportArgs& args) {
  const ExportFormat* format = find_format(args.format);
  if (!format) throw UsageError("unknown --format '" + args.format + "' (formats: " + format_names() + ")");
  if (args.output.empty()) throw UsageError("export needs -o FILE");
  ReportSession session;
  if (int status = open_report(args.report, /*with_live_at_peak=*/true, &session); status != kExitOk) return status;
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
  add_trace(*command, &args->report.trace);
  std::string help = "one of";
  for (const ExportFormat& f : kFormats)
    help += std::string(help == "one of" ? " " : "; ") + f.name + " (" + f.help + ")";
  command->add_option("--format", args->format, help)->required()->type_name("FORMAT");
  command->add_option("-o,--output", args->output, "the file to write")->required()->type_name("FILE");
  command
      ->add_option("--debug-paths", args->report.debug_paths,
                   "find symbol files in these directories too, by build id or by file name")
      ->type_name("DIR[:DIR...]");
  return [args] { return export_trace(*args); };
}

}  // namespace memtrace
