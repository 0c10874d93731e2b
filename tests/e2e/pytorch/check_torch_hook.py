"""A libc10.so without the allocator hook memtrace knows: the trace says so once (Notice
TORCH_HOOK_MISSING), the text summary shows it, and tracing goes on at the driver level with exact
figures. Run with --libc10 without-hook (e2e_torch_hook_missing: the library of c10_without_hook.cc,
which exports only a near miss of the hook's mangled name) or --libc10 with-hook (e2e_torch_hook_present:
the fake libc10.so of tests/fakecuda, which exports the hook: no notice at all).

Sequence of torch_hook_load.cc on device 0 (MiB = 1048576), cudaMalloc only, so allocated = reserved
= driver bytes:
  a = 4 MiB -> 4;  [pause; dlopen(libc10.so, RTLD_LOCAL)];  b = 8 MiB -> 4 + 8 = 12 (peak);  [pause];
  free a -> 12 - 4 = 8;  c = 2 MiB -> 8 + 2 = 10;  free b -> 10 - 8 = 2.
  peak 12 MiB = 12582912, final 2 MiB = 2097152; 3 driver allocations, 2 frees = 5 events; no block
  events (nothing calls the allocator hook), so the allocator layer is not seen.
  Live at exit: c alone, 2 MiB = 2097152 bytes in 1 allocation.
The pauses are 5 x MEMTRACE_FLUSH_MS (20 ms here), so memtrace's writer thread looks at the loaded
modules between the load and the end; the notice must come out whether it is that pass or the final
flush at exit that sees libc10.so. The process runs no Python and drops nothing, so the only notice
possible is TORCH_HOOK_MISSING: notices are exactly [TORCH_HOOK_MISSING] without the hook, [] with it.
"""
import argparse
import json
import os
import subprocess
import sys

import e2e_lib
from e2e_lib import MIB

FLUSH_MS = 20
NOTICE = "TORCH_HOOK_MISSING"


def take_libc10_choice():
    """Removes --libc10 from the command line (e2e_lib.Case parses the rest); returns its value."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--libc10", choices=("without-hook", "with-hook"), required=True)
    known, rest = parser.parse_known_args()
    sys.argv[1:] = rest
    return known.libc10


def text_summary(case, trace):
    proc = subprocess.run([case.args.memtrace, "summary", trace], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        sys.exit(f"FAIL: memtrace summary {trace} exited with {proc.returncode}: {proc.stderr}")
    return proc.stdout


choice = take_libc10_choice()
case = e2e_lib.Case()
hook_expected = choice == "with-hook"
if hook_expected:
    libc10 = os.path.join(case.args.fake_lib_dir, "libc10.so")
else:  # its own directory under the program directory, see CMakeLists.txt
    libc10 = os.path.join(case.args.program_dir, "c10_without_hook", "libc10.so")

stdout, trace = case.run_traced([case.program("torch_hook_load"), libc10, str(5 * FLUSH_MS)],
                                {"MEMTRACE_FLUSH_MS": str(FLUSH_MS)})
own = json.loads(stdout.strip().splitlines()[-1])
case.check(f"{libc10} exports the hook (test setup)", hook_expected, own["exports_hook"])

summary = case.analyze("summary", trace)
case.check_health(summary, 5)
case.check_devices(summary, {
    0: {"peak_driver_bytes": 12 * MIB, "final_driver_bytes": 2 * MIB,
        "peak_allocated_bytes": 12 * MIB, "final_allocated_bytes": 2 * MIB,
        "peak_reserved_bytes": 12 * MIB, "final_reserved_bytes": 2 * MIB,
        "driver_allocations": 3, "driver_frees": 2, "block_allocations": 0, "block_frees": 0,
        "allocator_layer": False},
})
notices = summary.get("trace", {}).get("notices")
case.check("notice codes", [] if hook_expected else [NOTICE], [n.get("code") for n in notices or []])
if not hook_expected and notices:
    case.check("the notice's message names libc10.so", True, "libc10.so" in notices[0].get("message", ""))

text = text_summary(case, trace)
notice_lines = [line.strip() for line in text.splitlines() if line.strip().startswith(f"notice {NOTICE}")]
case.check(f"text summary lines 'notice {NOTICE}...'", 0 if hook_expected else 1, len(notice_lines))
print("\n".join(notice_lines))

leaks = case.analyze("leaks", trace)["leaks"]
case.check("leak sites", 1, len(leaks))
case.check("leaks[0].bytes", 2 * MIB, leaks[0]["bytes"] if leaks else None)
case.check("leaks[0].count", 1, leaks[0]["count"] if leaks else None)
case.finish()
