"""fork() while another thread starting the trace is inside its Python check (holding the check's lock): the child must not
inherit that lock held, and gets its own trace.

e2e_fork_during_python_check makes the main thread fork exactly while a worker thread starting the trace is inside the Python check
(see the program). Expected: exit status 0 ("child exit status 0": a child that hung on the inherited lock
is killed after 10 s and the program exits 5); two files:
  parent's: ["alloc 4 MiB", "free 4 MiB"], TraceEnd{EXIT, events 2}
  child's:  ["alloc 2 MiB", "free 2 MiB"], TraceStart.ppid = parent, TraceEnd{EXIT, events 2}
"""

import e2e_lib
import faults_lib

faults_lib.check_fork_at_a_moment(e2e_lib.Case(), "fork_during_python_check", ["alloc 4 MiB", "free 4 MiB"])
