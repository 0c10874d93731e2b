// The CLI's side of the control endpoint (proto/control_protocol.h): where process PID's endpoint and inject
// request are, one request line sent and one reply line read over DIR/PID.sock, and the inject request written.
// The socket is talked to only when it belongs to the process's uid: nobody else's socket gets our requests.
#pragma once
#include <string>

#include "attach/target_process.h"

namespace memtrace {

// The endpoint's files for one process: DIR, DIR/PID.sock, DIR/PID.inject, and the uid that must own them.
struct ControlEndpoint {
  int pid = 0;
  unsigned uid = 0;
  std::string dir;
  std::string socket_path;
  std::string inject_path;
};

// DIR by the protocol's rule from the target's XDG_RUNTIME_DIR (used when it is a directory owned by the
// target's real uid) else /tmp/memtrace-UID. False, with `why` (one line), when a path does not fit.
bool control_endpoint_of(const TargetProcess& target, ControlEndpoint* out, std::string* why);

// How a request went.
enum class ControlStatus {
  kOk,        // "ok ...": text is what follows "ok " (the trace's path; "STATE PATH" for status)
  kNoTracer,  // no socket file, or nobody listening on it (a stale one)
  kError,     // "error MESSAGE" (text: MESSAGE), or the exchange failed (text: one line saying how)
};
struct ControlReply {
  ControlStatus status = ControlStatus::kError;
  std::string text;
};

// Sends `request` (one line, without '\n') and reads the one reply line, each within `timeout_ms`.
ControlReply control_request(const ControlEndpoint& endpoint, const std::string& request, int timeout_ms);

// "PID has no memtrace tracer (...)": the line for kNoTracer, with what to do: a process that has loaded CUDA
// can be attached to (or started dormant); one that has not has nothing to record.
std::string no_tracer_message(int pid, bool cuda_loaded);

// Serializes the memtrace commands that load a tracer into one process: an exclusive flock(2) on
// DIR/PID.inject.lock, held from before the inject request is written until the endpoint answers or the load
// failed. Without it a second `memtrace attach` of the same process would take the first one's request for a stale
// one and remove it before the tracer's constructor read it: the tracer would load without an endpoint, for good.
// The lock file stays in DIR (empty, mode 0600).
class InjectLock {
 public:
  InjectLock() = default;
  InjectLock(const InjectLock&) = delete;
  InjectLock& operator=(const InjectLock&) = delete;
  ~InjectLock();
  // Waits for the lock, creating DIR as write_inject_request does. False, with `why` (one line), when it cannot.
  bool acquire(const ControlEndpoint& endpoint, std::string* why);

 private:
  int fd_ = -1;
};

// Writes the inject request DIR/PID.inject (mode 0600, owned by the endpoint's uid), creating DIR (mode 0700)
// where missing. False, with `why`, when DIR is not a directory of that uid alone, or a file cannot be written.
bool write_inject_request(const ControlEndpoint& endpoint, std::string* why);

}  // namespace memtrace
