"""The tracer writes a Module record before any Stack that has a native frame inside it (memtrace.proto,
Module), also for a library loaded after tracing started: deep_stack.cc allocates through the driver first, then
dlopen()s the test double's libc10_cuda.so and allocates a block from inside it. Checked on the raw records
(trace_file.py): for each Stack, every native frame lies in the executable range [start, end) of a Module written
earlier in the file; and libc10_cuda.so's Module comes after the first Event (the late load is exercised).
"""
import e2e_lib
import faults_lib

case = e2e_lib.Case()
trace_file = faults_lib.trace_file
_, path = case.run_traced([case.program("deep_stack")])
trace = trace_file.TraceFile(path)
M, S = trace_file.MODULE_FIELDS, trace_file.STACK_FIELDS
ranges = []
stacks = 0
events_before_c10_cuda = None
frames_before_their_module = []
for kind, fields in trace.records:
    if kind == trace_file.MODULE:
        ranges.append((trace_file.first(fields, M["start"], 0), trace_file.first(fields, M["end"], 0)))
        if trace_file.first(fields, M["path"], b"").endswith(b"/libc10_cuda.so"):
            events_before_c10_cuda = len([k for k, _ in trace.records[:trace.records.index((kind, fields))]
                                          if k == trace_file.EVENT])
    elif kind == trace_file.STACK:
        stacks += 1
        for packed in fields.get(S["frames"], []):
            for frame in trace_file.packed_varints(packed):
                if frame >> 63 == 0 and not any(start <= frame < end for start, end in ranges):
                    frames_before_their_module.append(hex(frame))
case.check("stacks recorded", True, stacks >= 4)
case.check("libc10_cuda.so's Module written after the first Event", True, (events_before_c10_cuda or 0) > 0)
case.check("native frames with no Module written before their Stack", [], frames_before_their_module)
case.finish()
