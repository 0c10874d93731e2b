// `memtrace diff BEFORE AFTER [--json] [--top N] [--all-frames] [--debug-paths DIR[:DIR...]]`: what moved between
// two traces of one program, per device and per call site (analysis/diff.h).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "analysis/diff.h"
#include "cli/report_session.h"
#include "report/json/diff_json.h"
#include "report/text/diff_text.h"
#include "util/terminal_text.h"

namespace memtrace {
namespace {

// The command line: the two traces, and the report options every report command has (ReportArgs, less TRACE).
struct DiffArgs {
  ReportArgs before, after;  // the options are set on `before` and copied to `after`
};

// A positional trace (BEFORE or AFTER) bound to `trace`.
void add_trace_positional(CLI::App& command, const char* name, const char* help, TraceArg* trace) {
  command
      .add_option_function<std::string>(
          name,
          [trace](const std::string& path) {
            trace->path = path;
            trace->given = true;
          },
          help)
      ->type_name("");
}

int diff_traces(DiffArgs& args) {
  if (!args.before.trace.given || !args.after.trace.given) throw UsageError("diff needs two traces: BEFORE and AFTER");
  TraceArg after_trace = args.after.trace;
  args.after = args.before;
  args.after.trace = after_trace;
  // Each trace is opened as the one-trace reports open theirs: a bad file gets its one line, naming it, exit 2.
  ReportSession before, after;
  if (int status = open_report(args.before, /*with_live_at_peak=*/true, &before); status != kExitOk) return status;
  if (int status = open_report(args.after, /*with_live_at_peak=*/true, &after); status != kExitOk) return status;
  TraceFigures before_figures, after_figures;
  for (auto [session, figures] : {std::pair{&before, &before_figures}, std::pair{&after, &after_figures}}) {
    const Analysis& a = *session->analysis;
    try {
      IterationReport iterations = analyze_iterations(a, *session->resolver, a.nvtx_ranges);
      *figures = gather_trace_figures(a, iterations, breakdowns_at_peaks(a, iterations.phases, *session->resolver));
    } catch (const TraceError& e) {
      return report_trace_error(a.path, e);
    }
  }
  const DiffResult result = diff(before_figures, after_figures);
  if (args.before.json) {
    nlohmann::json report = diff_json(*before.analysis, *before.resolver, *before.symbolizer, *after.analysis,
                                      *after.resolver, *after.symbolizer, result);
    std::cout << json_terminal_safe(report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << '\n';
    return kExitOk;
  }
  print_diff(std::cout, {*before.analysis, *before.resolver}, {*after.analysis, *after.resolver}, result,
             after.options);
  return kExitOk;
}

}  // namespace

RunCommand add_diff(CLI::App& memtrace) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* command = memtrace.add_subcommand(
      "diff",
      "what moved between two traces of one program: peak allocated per device, bytes at the peak and "
      "growth per call site");
  add_trace_positional(*command, "BEFORE", "the .mtrace file of the run before the change", &args->before.trace);
  add_trace_positional(*command, "AFTER", "the .mtrace file of the run after it", &args->after.trace);
  ReportArgs& options = args->before;
  command->add_flag("--json", options.json, "the diff as one JSON document instead of text");
  command
      ->add_option_function<std::string>(
          "--top", [args](const std::string& value) { args->before.top = value; }, "call sites shown (default 10)")
      ->type_name("N");
  command->add_flag("--all-frames", options.all_frames,
                    "every frame, also the runtime's own and those not symbolized on this machine (as offsets)");
  command
      ->add_option_function<std::string>(
          "--debug-paths", [args](const std::string& value) { args->before.debug_paths = value; },
          "find symbol files in these directories too, by build id or by file name")
      ->type_name("DIR[:DIR...]");
  return [args] { return diff_traces(*args); };
}

}  // namespace memtrace
