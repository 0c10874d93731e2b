// Hooks on the process's own life, not on CUDA: signals that end the process, _exit, exec. They let the trace end with a
// TraceEnd saying how the process ended instead of losing the last flush interval.
#pragma once

namespace memtrace {

// Installs our handler for each signal that ends the process (crash signals, SIGTERM, SIGINT, SIGHUP, ...: the
// table kEndingSignals in process_hooks.cc), keeping whatever the program had installed as the handler to chain
// to; a signal the program ignores stays ignored, with nothing of ours in front. Called when tracing starts; a
// later call (a forked child's start) keeps the table it inherited.
void ending_signals_install();

}  // namespace memtrace
