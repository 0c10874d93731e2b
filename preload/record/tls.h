// Thread-local variables of the tracer use the initial-exec model: a hook may run on any thread at any
// time, and the default (global-dynamic) model can allocate and take the loader's lock on a thread's first
// access. libmemtrace.so is preloaded, so its TLS block is part of every thread's static TLS.
#pragma once

#define MEMTRACE_TLS __thread __attribute__((tls_model("initial-exec")))
