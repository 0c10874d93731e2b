// The control endpoint of a dormant or injected tracer (proto/control_protocol.h): a Unix socket only the process's
// owner can use, served by one thread of ours that turns `memtrace attach|detach|snapshot PID` into
// recorder_attach / recorder_detach / recorder_snapshot (record/lifecycle.h).
#pragma once

#include "record/schema.h"

namespace memtrace {

// Creates the endpoint and starts its thread. `origin`: kAttachDormant (preloaded, MEMTRACE_START=dormant) or
// kAttachInjected (loaded into the running process). False, with one line on stderr, when the endpoint could not
// be made safely (its directory is not the owner's alone, the path is too long): the process runs on untraced.
bool control_server_start(TraceOrigin origin);

// Removes the socket file (exit, exec). Async-signal-safe.
void control_server_remove_endpoint();

}  // namespace memtrace
