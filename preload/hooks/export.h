// How libmemtrace.so exports an interposed entry point. The library is built with hidden visibility
// (preload/CMakeLists.txt), so a definition is visible to the traced job only when marked with
// MEMTRACE_EXPORT, and the version script made from hooks.def (plus the process hooks, dlsym, the PyTorch
// hooks and NVTX's injection entry point InitializeInjectionNvtx2 of nvtx/nvtx_injection.cc, listed there)
// decides what is exported in the end; tests/preload/check_exports.sh checks the result.
#pragma once

#define MEMTRACE_EXPORT __attribute__((visibility("default")))
