"""In a set-gid process (AT_SECURE = 1) memtrace does nothing: no file, no line on stderr.

e2e_secure_dlopen loads libmemtrace.so (and the fake libcuda.so.1) with dlopen and allocates 4 MiB and frees it through the
library's cudaMalloc/cudaFree (2 events). A copy of it is made set-gid to group 65534 (nogroup): run by a
process whose real group is another one (the checker runs it with real group 0 when root), the kernel
sets AT_SECURE.
  control (the plain program, AT_SECURE=0): exit 0, one trace with the 2 events;
  set-gid copy (AT_SECURE=1):              exit 0, no file, no "memtrace:" line on stderr.
"""
import os
import shutil

import e2e_lib
import faults_lib

case = e2e_lib.Case()
if os.getuid() != 0:
    print("SKIP: making a set-gid copy for another group needs root")
    raise SystemExit(77)
work = faults_lib.work_dir(case)
program = case.program("secure_dlopen")
secure_copy = os.path.join(work, "e2e_secure_dlopen_setgid")
shutil.copy(program, secure_copy)
os.chown(secure_copy, 0, 65534)
os.chmod(secure_copy, 0o2755)
env = faults_lib.untraced_env(case)
libcuda = os.path.join(case.args.fake_lib_dir, "libcuda.so.1")

_, control = faults_lib.run([program, case.args.preload, libcuda], env, timeout=30)
faults_lib.echo(control, "control")
case.check("control: AT_SECURE", True, "AT_SECURE=0" in control.stdout.splitlines())
case.check("control: exit status", 0, control.exit_status)
traces = faults_lib.trace_paths(case)
case.check("control: trace files", 1, len(traces))
if traces:
    case.check("control: events", ["alloc 4 MiB", "free 4 MiB"],
               faults_lib.describe_events(faults_lib.trace_file.TraceFile(traces[0])))
    os.remove(traces[0])

_, secure = faults_lib.run([secure_copy, case.args.preload, libcuda], env, timeout=30)
faults_lib.echo(secure, "set-gid copy")
case.check("set-gid: AT_SECURE (precondition)", True, "AT_SECURE=1" in secure.stdout.splitlines())
case.check("set-gid: exit status", 0, secure.exit_status)
case.check("set-gid: trace files", [], faults_lib.trace_paths(case))
case.check("set-gid: memtrace lines on stderr", [], faults_lib.memtrace_lines(secure.stderr))
case.finish()
