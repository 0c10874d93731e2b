// The CLI's side of the control endpoint (attach/control_client.h).
#include "attach/control_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "control_protocol.h"

namespace memtrace {
namespace {

int64_t now_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// Waits until `fd` is ready for `events` or `deadline_ms` passes. False on timeout or error.
bool wait_ready(int fd, short events, int64_t deadline_ms) {
  for (;;) {
    const int64_t left = deadline_ms - now_ms();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int ready = poll(&p, 1, int(left));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

ControlReply failed(const std::string& why) { return {ControlStatus::kError, why}; }

// The reply line as the protocol words it.
ControlReply parse_reply(const std::string& line) {
  if (line.rfind("ok ", 0) == 0) return {ControlStatus::kOk, line.substr(3)};
  if (line == "ok") return {ControlStatus::kOk, {}};
  if (line.rfind("error ", 0) == 0) return {ControlStatus::kError, line.substr(6)};
  return failed("the tracer's reply is not of the protocol: '" + line + "'");
}

}  // namespace

bool control_endpoint_of(const TargetProcess& target, ControlEndpoint* out, std::string* why) {
  ControlEndpoint e;
  e.pid = target.pid;
  e.uid = target.uid[0];
  struct stat runtime {};
  const bool owned = !target.runtime_dir.empty() && stat(target.runtime_dir.c_str(), &runtime) == 0 &&
                     S_ISDIR(runtime.st_mode) && runtime.st_uid == e.uid;
  char dir[4096], socket_path[sizeof(sockaddr_un::sun_path)], inject_path[4096];
  if (!control_dir(target.runtime_dir.c_str(), owned, e.uid, dir, sizeof dir) ||
      !control_path(dir, e.pid, kControlSocketSuffix, socket_path, sizeof socket_path) ||
      !control_path(dir, e.pid, kInjectRequestSuffix, inject_path, sizeof inject_path)) {
    *why = "its control endpoint's path under " + std::string(dir) + " is too long for a Unix socket";
    return false;
  }
  e.dir = dir;
  e.socket_path = socket_path;
  e.inject_path = inject_path;
  *out = e;
  return true;
}

ControlReply control_request(const ControlEndpoint& endpoint, const std::string& request, int timeout_ms) {
  if (request.size() + 1 > kMaxControlLine || request.find('\n') != std::string::npos)
    return failed("the request is longer than one line of " + std::to_string(kMaxControlLine) + " bytes");
  struct stat file {};
  if (lstat(endpoint.socket_path.c_str(), &file) != 0)
    return errno == ENOENT ? ControlReply{ControlStatus::kNoTracer, {}}
                           : failed(endpoint.socket_path + ": " + std::strerror(errno));
  if (!S_ISSOCK(file.st_mode)) return failed(endpoint.socket_path + " is not a socket: not talking to it");
  if (file.st_uid != endpoint.uid)
    return failed(endpoint.socket_path + " belongs to uid " + std::to_string(file.st_uid) +
                  ", not to the process's uid " + std::to_string(endpoint.uid) + ": not talking to it");
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return failed(std::string("socket: ") + std::strerror(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, endpoint.socket_path.c_str(), endpoint.socket_path.size() + 1);
  const int64_t deadline = now_ms() + timeout_ms;
  ControlReply reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 && errno != EINPROGRESS) {
    // A socket file nobody listens on: the tracer of a process that died (or of an earlier process of this pid).
    reply = errno == ECONNREFUSED || errno == ENOENT ? ControlReply{ControlStatus::kNoTracer, {}}
                                                     : failed(endpoint.socket_path + ": " + std::strerror(errno));
    close(fd);
    return reply;
  }
  const std::string line = request + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    if (!wait_ready(fd, POLLOUT, deadline)) break;
    const ssize_t n = send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    if (n > 0) sent += size_t(n);
  }
  std::string answer;
  bool complete = false;
  while (sent == line.size() && answer.size() < kMaxControlLine && wait_ready(fd, POLLIN, deadline)) {
    char buffer[512];
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    answer.append(buffer, size_t(n));
    if (const size_t end = answer.find('\n'); end != std::string::npos) {
      answer.resize(end);
      complete = true;
      break;
    }
  }
  close(fd);
  if (complete) return parse_reply(answer);
  if (sent != line.size())
    return failed("the tracer did not take the request within " + std::to_string(timeout_ms) + " ms");
  return failed(now_ms() >= deadline ? "the tracer did not answer within " + std::to_string(timeout_ms) + " ms"
                                     : "the tracer closed the connection without a whole reply");
}

std::string no_tracer_message(int pid, bool cuda_loaded) {
  const std::string id = std::to_string(pid);
  if (!cuda_loaded)
    return id + " has no memtrace tracer and has not loaded CUDA (no libcuda.so in /proc/" + id +
           "/maps): nothing is recorded there";
  return id + " has no memtrace tracer (start it with MEMTRACE_START=dormant, or `memtrace attach " + id +
         "` loads one)";
}

namespace {

// DIR, created where missing for the process's uid (the tracer refuses one that is not its own alone). False, with
// `why`, when it cannot be, or is not a directory of that uid alone.
bool prepare_endpoint_dir(const ControlEndpoint& endpoint, std::string* why) {
  if (mkdir(endpoint.dir.c_str(), 0700) == 0) {
    if (chown(endpoint.dir.c_str(), endpoint.uid, gid_t(-1)) != 0) {
      *why = endpoint.dir + ": cannot give it to uid " + std::to_string(endpoint.uid) + ": " + std::strerror(errno);
      rmdir(endpoint.dir.c_str());
      return false;
    }
  } else if (errno != EEXIST) {
    *why = endpoint.dir + ": cannot create it: " + std::strerror(errno);
    return false;
  }
  struct stat dir {};
  if (lstat(endpoint.dir.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode) || dir.st_uid != endpoint.uid ||
      (dir.st_mode & 022) != 0) {
    *why = endpoint.dir + " is not a directory of uid " + std::to_string(endpoint.uid) + " alone";
    return false;
  }
  return true;
}

constexpr char kInjectLockSuffix[] = ".inject.lock";

}  // namespace

InjectLock::~InjectLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

bool InjectLock::acquire(const ControlEndpoint& endpoint, std::string* why) {
  if (!prepare_endpoint_dir(endpoint, why)) return false;
  char path[4096];
  if (!control_path(endpoint.dir.c_str(), endpoint.pid, kInjectLockSuffix, path, sizeof path)) {
    *why = endpoint.dir + ": the inject lock's path is too long";
    return false;
  }
  fd_ = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd_ < 0) {
    *why = std::string(path) + ": cannot open it: " + std::strerror(errno);
    return false;
  }
  if (fchown(fd_, endpoint.uid, gid_t(-1)) != 0) {
    // root giving it to the process's uid failed: the lock works all the same
  }
  int locked;
  do {
    locked = flock(fd_, LOCK_EX);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    *why = std::string(path) + ": cannot lock it: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool write_inject_request(const ControlEndpoint& endpoint, std::string* why) {
  if (!prepare_endpoint_dir(endpoint, why)) return false;
  unlink(endpoint.inject_path.c_str());  // a stale one, of an injection that failed
  const int fd =
      open(endpoint.inject_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) {
    *why = endpoint.inject_path + ": cannot create it: " + std::strerror(errno);
    return false;
  }
  const bool given = fchown(fd, endpoint.uid, gid_t(-1)) == 0 && fchmod(fd, S_IRUSR | S_IWUSR) == 0;
  const int error = errno;
  close(fd);
  if (!given) {
    *why =
        endpoint.inject_path + ": cannot give it to uid " + std::to_string(endpoint.uid) + ": " + std::strerror(error);
    unlink(endpoint.inject_path.c_str());
    return false;
  }
  return true;
}

}  // namespace memtrace
