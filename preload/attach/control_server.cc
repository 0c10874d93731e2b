// The control endpoint (control_server.h, proto/control_protocol.h): DIR/PID.sock, served by one thread of ours
// with every signal blocked (the job's signals stay the job's), one request at a time, one line each way.
// Safety: DIR is made 0700 and refused unless it is a directory of our uid that no one else can write; the socket
// is 0600 inside it; a peer whose SO_PEERCRED uid is neither ours nor root is answered "error not your process".
#include "attach/control_server.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>

#include "control_protocol.h"
#include "record/lifecycle.h"

namespace memtrace {
namespace {

char g_socket_path[sizeof(sockaddr_un::sun_path)];
std::atomic<pid_t> g_endpoint_pid{0};  // the process whose socket g_socket_path is (0: none)
int g_listen_fd = -1;
TraceOrigin g_origin = TraceOrigin::kAttachDormant;
bool g_started = false;  // this process started its endpoint (a forked child has none: see on_fork_child)

void say(const char* line) { fprintf(stderr, "memtrace: %s\n", line); }

// DIR for our uid: XDG_RUNTIME_DIR's when it is an absolute directory of ours, else /tmp/memtrace-UID.
bool endpoint_dir(char* out, size_t size) {
  const char* runtime = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  const bool owned =
      runtime && runtime[0] == '/' && stat(runtime, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid();
  return control_dir(runtime, owned, getuid(), out, size);
}

// Makes DIR (0700) where missing; false, with one line on stderr, unless it is a directory of ours that no one
// else can write (lstat: a symlink planted there is refused too).
bool check_dir(const char* dir) {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "memtrace: cannot create the control directory %s: %s; no attach endpoint\n", dir, strerror(errno));
    return false;
  }
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) {
    fprintf(stderr,
            "memtrace: the control directory %s is not a directory of uid %u that only it can write; no attach "
            "endpoint\n",
            dir, static_cast<unsigned>(getuid()));
    return false;
  }
  return true;
}

void reply(int fd, const char* line) {
  size_t n = strlen(line);
  for (size_t done = 0; done < n;) {
    ssize_t w = send(fd, line + done, n - done, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(w);
  }
}

// Reads one request line (without its '\n') into `line`; false when none came whole within the timeout.
bool read_line(int fd, char* line, size_t size) {
  size_t n = 0;
  while (n < size - 1) {
    ssize_t r = recv(fd, line + n, size - 1 - n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += static_cast<size_t>(r);
    if (memchr(line, '\n', n)) break;
  }
  line[n] = '\0';
  char* end = strchr(line, '\n');
  if (!end) return false;
  *end = '\0';
  return true;
}

// The argument after `command` ("attach PATTERN"), or null when `line` is another command.
const char* argument_of(const char* line, const char* command) {
  const size_t n = strlen(command);
  if (strncmp(line, command, n) != 0) return nullptr;
  if (line[n] == '\0') return line + n;
  if (line[n] == ' ') return line + n + 1;
  return nullptr;
}

void answer_outcome(int fd, const AttachOutcome& outcome) {
  static char line[kMaxControlLine + 600];
  if (outcome.ok) snprintf(line, sizeof line, "ok %s\n", outcome.path);
  else snprintf(line, sizeof line, "error %s\n", outcome.error);
  reply(fd, line);
}

void serve(int fd) {
  static char line[kMaxControlLine + 1];
  if (!read_line(fd, line, sizeof line)) {
    reply(fd, "error the request is not one line of at most 4200 bytes\n");
    return;
  }
  static AttachOutcome outcome;
  outcome = AttachOutcome{};
  if (const char* pattern = argument_of(line, "attach")) {
    recorder_attach(pattern, g_origin, &outcome);
    answer_outcome(fd, outcome);
  } else if (argument_of(line, "detach") && line[6] == '\0') {
    recorder_detach(&outcome);
    answer_outcome(fd, outcome);
  } else if (const char* pattern = argument_of(line, "snapshot")) {
    recorder_snapshot(pattern, &outcome);
    answer_outcome(fd, outcome);
  } else if (strcmp(line, "status") == 0) {
    static char path[4096];
    static char answer[4096 + 32];
    const bool running = recorder_status(path, sizeof path);
    snprintf(answer, sizeof answer, "ok %s %s\n",
             running                                    ? "running"
             : g_origin == TraceOrigin::kAttachInjected ? "injected"
                                                        : "dormant",
             running ? path : "-");
    reply(fd, answer);
  } else {
    reply(fd, "error unknown request (attach PATTERN, detach, snapshot PATTERN, status)\n");
  }
}

// The peer's uid must be ours or root's: nobody else may start or stop a trace of this process.
bool peer_allowed(int fd) {
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) return false;
  return peer.uid == getuid() || peer.uid == 0;
}

void* serve_loop(void*) {
  for (;;) {
    int fd = accept4(g_listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return nullptr;
    }
    // A peer that connects and says nothing does not hold the endpoint for long.
    timeval timeout{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    if (peer_allowed(fd)) {
      serve(fd);
    } else {
      // The request is read (and dropped) first: a peer that sends before it reads gets the answer, not EPIPE.
      static char ignored[kMaxControlLine + 1];
      read_line(fd, ignored, sizeof ignored);
      reply(fd, "error not your process\n");
    }
    close(fd);
  }
}

void on_fork_child() {
  // The parent's socket and thread are not the child's: it makes its own at its first event.
  g_started = false;
  g_listen_fd = -1;
}

// The inject request DIR/PID.inject (control_protocol.h): a regular file of ours, mode 0600. Removed when found.
bool take_inject_request() {
  char dir[4096], path[4096 + 64];
  if (!endpoint_dir(dir, sizeof dir) || !control_path(dir, getpid(), kInjectRequestSuffix, path, sizeof path))
    return false;
  struct stat st;
  if (lstat(path, &st) != 0) return false;
  const bool valid = S_ISREG(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 0777) == 0600;
  unlink(path);
  if (!valid) say("the inject request is not a 0600 file of this process's uid; not attaching");
  return valid;
}

// Loaded into a running process by `memtrace attach` (attach/injector.h): the request file says so.
__attribute__((constructor)) void on_load_injected() {
  pthread_atfork(nullptr, nullptr, on_fork_child);
  if (!take_inject_request()) return;
  if (recorder_start_injected()) control_server_start(TraceOrigin::kAttachInjected);
}

}  // namespace

bool control_server_start(TraceOrigin origin) {
  if (g_started) return true;
  char dir[4096];
  if (!endpoint_dir(dir, sizeof dir)) {
    say("the control directory's path is too long; no attach endpoint");
    return false;
  }
  if (!check_dir(dir)) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (!control_path(dir, getpid(), kControlSocketSuffix, address.sun_path, sizeof address.sun_path)) {
    fprintf(stderr, "memtrace: the control socket's path under %s is longer than %zu bytes; no attach endpoint\n", dir,
            sizeof address.sun_path - 1);
    return false;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    fprintf(stderr, "memtrace: cannot make the control socket: %s; no attach endpoint\n", strerror(errno));
    return false;
  }
  // A socket of our pid is a dead process's (pids are reused) or an earlier image of ours (exec): stale.
  unlink(address.sun_path);
  // Inside a 0700 directory the socket is reachable by us alone until it is 0600.
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || chmod(address.sun_path, 0600) != 0 ||
      listen(fd, 4) != 0) {
    fprintf(stderr, "memtrace: cannot serve the control socket %s: %s; no attach endpoint\n", address.sun_path,
            strerror(errno));
    close(fd);
    unlink(address.sun_path);
    return false;
  }
  memcpy(g_socket_path, address.sun_path, sizeof g_socket_path);
  g_endpoint_pid.store(getpid());
  g_listen_fd = fd;
  g_origin = origin;
  // Every signal blocked in the thread (it inherits the mask it is created with): the job's signals go to the
  // job's threads.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pthread_t thread;
  const int created = pthread_create(&thread, nullptr, serve_loop, nullptr);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (created != 0) {
    fprintf(stderr, "memtrace: cannot start the control thread: %s; no attach endpoint\n", strerror(created));
    control_server_remove_endpoint();
    close(fd);
    g_listen_fd = -1;
    return false;
  }
  pthread_detach(thread);
  pthread_setname_np(thread, "memtrace-ctl");
  g_started = true;
  return true;
}

void control_server_remove_endpoint() {
  // Only the process that made it (a forked or vfork child shares the path, not the socket).
  if (g_endpoint_pid.load() != getpid()) return;
  unlink(g_socket_path);
  g_endpoint_pid.store(0);
}

}  // namespace memtrace
