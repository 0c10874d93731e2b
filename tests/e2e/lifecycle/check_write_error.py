"""A write error (EFBIG under RLIMIT_FSIZE, SIGXFSZ ignored) in the middle of a run.

e2e_write_error: 3 events (alloc 4 MiB, alloc 8 MiB, free 4 MiB), a pause of SETTLE_MS = 500 ms
(10 flush intervals: they are written), then the file size limit is set to the file's size + 16 bytes,
then 100 x (alloc 1 MiB, free) whose chunk cannot be written, a pause, 100 more pairs, "done", exit 0.
Expected: exit status 0 and "done" (the job is unaffected); with MEMTRACE_QUIET=1 (no start line) exactly
one line on stderr starting with "memtrace:"; the file ends inside a frame (at most 16 bytes of the
failed chunk were written) and its whole frames hold exactly the first 3 events and no TraceEnd. The
analyzer reads it: trace.events 3, trace.truncated true, trace.end null.
"""
import os

import e2e_lib
import faults_lib

case = e2e_lib.Case()
path = os.path.join(case.args.out_dir, "limited.mtrace")
_, outcome = faults_lib.run([case.program("write_error"), path, str(faults_lib.SETTLE_MS)],
                            faults_lib.traced_env(case, {"MEMTRACE_OUTPUT": path, "MEMTRACE_QUIET": "1"}), timeout=30)
faults_lib.echo(outcome, "e2e_write_error")
case.check("exit status", 0, outcome.exit_status)
case.check("program finished", True, "done" in outcome.stdout.splitlines())
case.check("lines on stderr starting with memtrace:", 1, len(faults_lib.memtrace_lines(outcome.stderr)))
trace = faults_lib.only_trace(case)
case.check("file ends on a frame boundary", False, trace.complete)
case.check("events in whole frames", ["alloc 4 MiB", "alloc 8 MiB", "free 4 MiB"], faults_lib.describe_events(trace))
case.check("TraceEnd records", [], trace.ends())
summary = case.analyze("summary", trace.path).get("trace", {})
case.check("analyzer trace.events", 3, summary.get("events"))
case.check("analyzer trace.truncated", True, summary.get("truncated"))
case.check("analyzer trace.end", {"how": None, "signal": 0}, summary.get("end"))
case.finish()
