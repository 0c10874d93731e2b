// Loads libmemtrace.so into a running process (`memtrace attach PID` when the process has no tracer): a small
// ptrace-based injector (the GPU machine has no gdb). It stops one thread of the target at a safe point (inside, or
// on the return from, a system call that the loader and malloc do not make while holding their locks; the main
// thread first, then the others), makes it call the process's own dlopen(LIBRARY, RTLD_NOW) on its own stack, and
// restores every register before letting it go.
// The tracer's constructor then finds the inject request (proto/control_protocol.h) and opens the endpoint.
//
// x86-64 Linux; on other architectures inject_library returns kPtraceRefused, saying so.
#pragma once
#include <string>

namespace memtrace {

// Why an injection did not happen, each with its one line for the user (inject_error_message).
enum class InjectError {
  kNone,
  kNoSuchProcess,  // the pid does not exist (or is a zombie)
  kNotOwner,       // another user's process, and no CAP_SYS_PTRACE
  kYamaScope,      // /proc/sys/kernel/yama/ptrace_scope forbids it (its value said)
  kPtraceRefused,  // ptrace refused otherwise (a container's seccomp, already traced by a debugger)
  kSetuid,         // a set-uid / set-gid program (its credentials differ)
  kNoCuda,         // no CUDA library is loaded in the process: nothing to trace
  kNoDlopen,       // the process's C library has no dlopen we can find
  kNoSafePoint,    // no thread reached a safe point in time
  kDlopenFailed,   // the process's dlopen returned NULL (its dlerror said)
};

struct InjectResult {
  InjectError error = InjectError::kNone;
  std::string detail;  // the specifics: dlerror's text, ptrace_scope's value, errno's text
};

// Loads `library` (an absolute path) into process `pid`. Waits at most `timeout_ms` for a safe point: half of it
// for the main thread when the process has others, which share the rest.
InjectResult inject_library(int pid, const std::string& library, int timeout_ms);

// "memtrace: cannot attach to PID: ..." without the prefix: the reason in one line.
std::string inject_error_message(int pid, const InjectResult& result);

}  // namespace memtrace
