// A blocking read() across a SIGHUP: whether it returns the data or fails with EINTR must not change under the
// tracer, whose handler sits in front of the program's (or, for an ignored signal, must not be there at all).
// Usage: e2e_blocking_read MODE MARKER_FILE, MODE one of
//   ignored:          no handler: the checker starts the program with SIGHUP ignored (as nohup does);
//   restart-before:   a SIGHUP handler installed with SA_RESTART before the first CUDA call (before tracing starts);
//   restart-after:    the same, installed after the first CUDA call (while tracing runs);
//   norestart-after:  installed after the first CUDA call without SA_RESTART;
//   ignored-then-handler: started with SIGHUP ignored; a handler without SA_RESTART installed while tracing runs;
//   siginterrupt-signal-after: while tracing runs, siginterrupt(SIGHUP, 1) then signal(SIGHUP, handler): glibc's
//                     signal() leaves SA_RESTART off for a signal named by siginterrupt.
// Every handler appends "handler 1" to MARKER_FILE. A SIGUSR1 handler with SA_RESTART (installed first) creates
// MARKER_FILE.probe: the probe that tells the child the SIGHUP has been dealt with (see below).
//
// The program allocates 4 MiB (tracing starts), prints what sigaction() says about SIGHUP ("query: ignored",
// "query: own handler" or "query: default"), makes a pipe and forks. The child waits until the parent is blocked
// in read() on the pipe, sends it SIGHUP and then SIGUSR1, waits for the probe file, writes "x" and exits 0. The
// kernel delivers pending standard signals lowest number first, so once the SIGUSR1 handler ran, SIGHUP had been
// delivered or discarded: the data comes only after the read has been interrupted or not. The parent prints
// "read: x" (data) or "read: EINTR", waits for the child, frees the 4 MiB and returns 0.
// Events: alloc 4 MiB, free 4 MiB.
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "e2e_util.h"

namespace {

const char* g_marker = nullptr;
std::string g_probe;

void hup_handler(int) {
  int fd = open(g_marker, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    if (write(fd, "handler 1\n", 10) < 0) {
    }
    close(fd);
  }
}

void probe_handler(int) {
  int fd = open(g_probe.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) close(fd);
}

void install(int sig, void (*handler)(int), bool restart) {
  struct sigaction action {};
  action.sa_handler = handler;
  action.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, nullptr) != 0) std::exit(5);
}

// The parent's main thread is blocked in read(): /proc/PID/syscall names the system call it is in (readable
// with ptrace access to it; root has that); otherwise its state is S (sleeping), which right after the fork
// can only be that read.
bool blocked_in_read(pid_t pid) {
  char buf[64] = {};
  std::string path = "/proc/" + std::to_string(pid) + "/syscall";
  int fd = open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    // "running" while it runs, "-1 ..." outside a system call: only a number is one. (strtol reads "running" as 0,
    // which is SYS_read on x86-64: the child then signalled a parent that had not reached its read yet.)
    if (n > 0) return buf[0] >= '0' && buf[0] <= '9' && std::strtol(buf, nullptr, 10) == SYS_read;
  }
  path = "/proc/" + std::to_string(pid) + "/stat";
  fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  const char* paren = n > 0 ? std::strrchr(buf, ')') : nullptr;
  return paren && paren[1] == ' ' && paren[2] == 'S';
}

[[noreturn]] void child(pid_t parent, int write_fd) {
  for (int i = 0; !blocked_in_read(parent); i++) {
    if (i == 10000) _exit(4);  // 10 s
    usleep(1000);
  }
  kill(parent, SIGHUP);
  kill(parent, SIGUSR1);
  for (int i = 0; access(g_probe.c_str(), F_OK) != 0; i++) {
    if (i == 10000) _exit(4);
    usleep(1000);
  }
  if (write(write_fd, "x", 1) != 1) _exit(4);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc != 3) return 2;
  std::string mode = argv[1];
  g_marker = argv[2];
  g_probe = std::string(g_marker) + ".probe";
  install(SIGUSR1, probe_handler, /*restart=*/true);
  if (mode == "restart-before") install(SIGHUP, hup_handler, true);
  void* p;
  E2E_OK(cudaMalloc(&p, 4 * kMiB));
  if (mode == "restart-after") install(SIGHUP, hup_handler, true);
  if (mode == "norestart-after" || mode == "ignored-then-handler") install(SIGHUP, hup_handler, false);
  if (mode == "siginterrupt-signal-after") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // programs still call it; that is the case tested
    if (siginterrupt(SIGHUP, 1) != 0 || signal(SIGHUP, hup_handler) == SIG_ERR) return 5;
#pragma GCC diagnostic pop
  }
  struct sigaction current {};
  sigaction(SIGHUP, nullptr, &current);
  std::printf("query: %s\n", current.sa_handler == SIG_IGN       ? "ignored"
                             : current.sa_handler == hup_handler ? "own handler"
                             : current.sa_handler == SIG_DFL     ? "default"
                                                                 : "something else");
  int fds[2];
  if (pipe(fds) != 0) return 6;
  pid_t pid = fork();
  if (pid < 0) return 6;
  if (pid == 0) child(getppid(), fds[1]);
  char c = 0;
  ssize_t n = read(fds[0], &c, 1);
  int read_errno = errno;
  if (n == 1) std::printf("read: %c\n", c);
  else std::printf("read: %s\n", n < 0 && read_errno == EINTR ? "EINTR" : "something else");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::printf("child exit status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  E2E_OK(cudaFree(p));
  return 0;
}
