// Hooks on the process's own life, not on CUDA: fatal signals, _exit, exec. They let the trace end with a
// TraceEnd saying how the process ended instead of losing the last flush interval.
#pragma once

namespace memtrace {

// Installs the fatal-signal handler (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL), keeping whatever the program
// had installed as the handler to chain to. Called once when tracing starts.
void crash_signals_install();

}  // namespace memtrace
