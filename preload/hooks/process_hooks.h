// Hooks on the process's own life, not on CUDA: signals that end the process, _exit, exec. They let the trace end
// with a TraceEnd saying how the process ended instead of losing the last flush interval (record/lifecycle.h).
// Their one entry point for the recorder, ending_signals_install(), is declared in record/clients.h.
#pragma once

#include "record/clients.h"
