// The control protocol between `memtrace attach|detach|snapshot PID` (attach/, in the memtrace CLI) and the tracer
// inside process PID (preload/attach/control_server.cc): the second contract between the two halves, beside the
// trace format (memtrace.proto). Plain constexpr and <cstdint>/<cstdio>/<cstring> only: the tracer includes it.
//
// Endpoint: a Unix stream socket, DIR/PID.sock, where DIR is
//   - $XDG_RUNTIME_DIR/memtrace when XDG_RUNTIME_DIR is set, absolute, and a directory owned by the process's
//     uid (the CLI reads the target's XDG_RUNTIME_DIR from /proc/PID/environ, so both sides agree);
//   - else /tmp/memtrace-UID.
// The tracer creates DIR mode 0700 where missing and refuses it (no endpoint, one line on stderr) unless it is a
// directory owned by its uid that no one else can write. The socket is mode 0600, and the tracer answers only a
// peer whose SO_PEERCRED uid is its own or 0: nothing another user can trigger. The socket is removed when the
// process exits or execs (a stale one of a dead pid is removed by the next tracer of that pid).
//
// Inject request: DIR/PID.inject, a regular file mode 0600 owned by the uid, written by `memtrace attach` right
// before it loads libmemtrace.so into PID (attach/injector.h). The tracer's constructor finds it only when loaded
// into a running process: it removes it and starts the endpoint in injected mode (no LD_PRELOAD hook is reached;
// events come from CUPTI and the c10 hook's GOT entries once attached).
//
// Requests: one line each, at most kMaxControlLine bytes including '\n':
//   attach PATTERN     start recording (MEMTRACE_OUTPUT's placeholders %p %h %r %%; empty: the process's
//                      MEMTRACE_OUTPUT, else the default); the trace opens with what is live now
//   detach             stop recording and complete the file
//   snapshot PATTERN   write the live set once as a trace of its own; stay dormant
//   status             what the tracer is doing
// Replies: one line: "ok PATH" (attach, detach, snapshot: the trace file), "ok STATE PATH" (status: STATE is
// dormant, running or injected; PATH the running trace's, or -), or "error MESSAGE" (one line for the user).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace memtrace {

inline constexpr size_t kMaxControlLine = 4200;  // a command and a 4096-byte path
inline constexpr char kControlDirInRuntimeDir[] = "memtrace";
inline constexpr char kControlSocketSuffix[] = ".sock";
inline constexpr char kInjectRequestSuffix[] = ".inject";

// The endpoint directory for uid `uid` given the process's XDG_RUNTIME_DIR (`runtime_dir`, null or empty when
// unset; `runtime_dir_owned` whether it is a directory owned by `uid`). False when it does not fit.
inline bool control_dir(const char* runtime_dir, bool runtime_dir_owned, unsigned uid, char* out, size_t size) {
  int n = runtime_dir && runtime_dir[0] == '/' && runtime_dir_owned
              ? snprintf(out, size, "%s/%s", runtime_dir, kControlDirInRuntimeDir)
              : snprintf(out, size, "/tmp/memtrace-%u", uid);
  return n > 0 && static_cast<size_t>(n) < size;
}

// DIR/PID + suffix. False when it does not fit (a Unix socket path holds at most 107 bytes: sockaddr_un).
inline bool control_path(const char* dir, int pid, const char* suffix, char* out, size_t size) {
  int n = snprintf(out, size, "%s/%d%s", dir, pid, suffix);
  return n > 0 && static_cast<size_t>(n) < size;
}

}  // namespace memtrace
