"""16 threads allocating and freeing at once: every event recorded, each with its own thread id.

e2e_threads16 4000: thread t (0..15) does 4000 x (alloc (t + 1) MiB, free). Events: 16 x 4000 x 2 =
128000, 8000 per thread; each thread id's allocations all have one size and the 16 sizes are 1..16 MiB;
every free frees an address allocated before it; no event from the main thread; one ThreadInfo per
thread id; TraceEnd{EXIT, events 128000, dropped_events 0}. A record is about 50 bytes, so 128000 fit
in the default 8 MiB chunk buffer even if the writer never ran: nothing may be dropped.

With --buffer-mb 1 (MEMTRACE_BUFFER_MB=1: 1 MiB buffers, which the writer may not drain in time), events
may be dropped, but every one is accounted for: events in the file + TraceEnd.dropped_events = 128000,
TraceEnd.events = the events in the file, and the EVENTS_DROPPED notices add up to dropped_events.

With --buffer-mb 1 --full-buffer wait (MEMTRACE_FULL_BUFFER=wait), a full buffer makes the thread wait for
the writer instead: nothing is dropped, and every exact check above holds again.
"""
import collections

import e2e_lib
import faults_lib
from faults_lib import trace_file

PAIRS = 4000
THREADS = 16
TOTAL = THREADS * PAIRS * 2


def add_arguments(parser):
    parser.add_argument("--buffer-mb", type=int)
    parser.add_argument("--full-buffer", choices=["drop", "wait"])


case = e2e_lib.Case(add_arguments)
extra = {"MEMTRACE_BUFFER_MB": str(case.args.buffer_mb)} if case.args.buffer_mb else {}
if case.args.full_buffer:
    extra["MEMTRACE_FULL_BUFFER"] = case.args.full_buffer
waits = case.args.full_buffer == "wait"
proc, outcome = faults_lib.run([case.program("threads16"), str(PAIRS)], faults_lib.traced_env(case, extra),
                               timeout=150)
faults_lib.echo(outcome, "e2e_threads16")
case.check("exit status", 0, outcome.exit_status)
trace = faults_lib.only_trace(case)
events = trace.events()
ends = trace.ends()
end = ends[0] if len(ends) == 1 else {}
case.check("TraceEnd records", 1, len(ends))
case.check("TraceEnd.how", "EXIT", end.get("how"))
case.check("TraceEnd is the last record", trace_file.END, trace.last_record_kind())
case.check("TraceEnd.events = events in the file", len(events), end.get("events"))
if case.args.buffer_mb and not waits:
    dropped = end.get("dropped_events", 0)
    print(f"dropped events: {dropped}")
    case.check("events in the file + dropped", TOTAL, len(events) + dropped)
    case.check("EVENTS_DROPPED notices add up to dropped_events", dropped,
               sum(trace_file.first(n, trace_file.NOTICE_FIELDS["count"], 0) for n in trace.notices(trace_file.NOTICE_EVENTS_DROPPED)))
    case.finish()
    raise SystemExit(0)

case.check("events", TOTAL, len(events))
case.check("dropped_events", 0, end.get("dropped_events"))
by_tid = collections.defaultdict(list)
for e in events:
    by_tid[e["tid"]].append(e)
case.check("distinct thread ids", THREADS, len(by_tid))
case.check("main thread recorded nothing", False, proc.pid in by_tid)
case.check("events per thread id", [2 * PAIRS] * THREADS, sorted(len(v) for v in by_tid.values()))
sizes = sorted(tuple(sorted({e["size"] for e in v if e["kind"] == trace_file.ALLOC})) for v in by_tid.values())
case.check("allocation sizes per thread id", [((t + 1) << 20,) for t in range(THREADS)], sizes)
case.check("frees of unknown addresses", 0, faults_lib.describe_events(trace).count("free ?"))
case.check("thread ids announced by ThreadInfo", sorted(by_tid), sorted(set(trace.thread_ids()) & set(by_tid)))
case.finish()
