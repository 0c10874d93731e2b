// Ended by a signal whose default action terminates the process (SIGTERM, SIGINT, SIGHUP, ...), with all its
// events recorded since the tracer's last flush (the checker sets a flush interval longer than the run).
// Usage: e2e_ending_signal SIGNAL SEND HANDLER MARKER_FILE READY_FILE
//   SIGNAL: its number;
//   SEND:   self     (kill(getpid(), SIGNAL)),
//           external (creates READY_FILE and waits: the checker sends the signal, as timeout or Slurm do),
//           kernel   (the kernel sends it: SIGPIPE by a write to a pipe whose reader is gone, SIGALRM by alarm();
//                     not SIGXFSZ, as RLIMIT_FSIZE would stop the trace file's own writes too);
//   HANDLER: none   (the default action: the process dies by SIGNAL),
//            after  (a sigaction() handler installed after the CUDA calls, while tracing runs),
//            before (a signal() handler installed before the first CUDA call, before tracing starts).
//   The handler appends "handler SIGNAL" to MARKER_FILE and sets a flag; main waits for the flag, then
//   allocates 16 MiB, frees it, prints "handled" and returns 0: the job lives on after the signal.
// Events: alloc 1 MiB ten times, alloc 2 MiB five times (15 events), then the signal; with a handler also
// alloc 16 MiB, free 16 MiB (17 events).
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "e2e_util.h"

namespace {

const char* g_marker = nullptr;
volatile sig_atomic_t g_handled = 0;

void program_handler(int sig) {
  char line[16] = "handler ";
  size_t n = std::strlen(line);
  if (sig >= 10) line[n++] = static_cast<char>('0' + sig / 10);
  line[n++] = static_cast<char>('0' + sig % 10);
  line[n++] = '\n';
  int fd = open(g_marker, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    if (write(fd, line, n) < 0) {
    }
    close(fd);
  }
  g_handled = 1;
}

void install_with_sigaction(int sig) {
  struct sigaction action {};
  action.sa_handler = program_handler;
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, nullptr) != 0) std::exit(5);
}

void send_by_kernel(int sig) {
  if (sig == SIGPIPE) {
    int fds[2];
    if (pipe(fds) != 0) std::exit(6);
    close(fds[0]);
    if (write(fds[1], "x", 1) < 0) std::printf("write: EPIPE\n");
  } else if (sig == SIGALRM) {
    alarm(1);
  } else {
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc != 6) return 2;
  int sig = std::atoi(argv[1]);
  const char* send = argv[2];
  const char* handler = argv[3];
  g_marker = argv[4];
  const char* ready = argv[5];
  bool handled = std::strcmp(handler, "none") != 0;
  if (std::strcmp(handler, "before") == 0 && signal(sig, program_handler) == SIG_ERR) return 5;
  void* p;
  for (int i = 0; i < 10; i++) E2E_OK(cudaMalloc(&p, 1 * kMiB));
  for (int i = 0; i < 5; i++) E2E_OK(cudaMalloc(&p, 2 * kMiB));
  if (std::strcmp(handler, "after") == 0) install_with_sigaction(sig);
  std::printf("sending signal %d\n", sig);
  if (std::strcmp(send, "self") == 0) {
    kill(getpid(), sig);
  } else if (std::strcmp(send, "external") == 0) {
    int fd = open(ready, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return 4;
    close(fd);
  } else {
    send_by_kernel(sig);
  }
  // The signal ends the process or runs the handler. Polled, not pause(): the handler may have run already.
  // Bounded (60 s): a signal that never comes fails the test through the exit status, not a hang.
  for (int i = 0; i < 600 && !g_handled; i++) usleep(100000);
  if (!handled || !g_handled) {
    std::printf("still alive\n");
    return 1;
  }
  void* big;
  E2E_OK(cudaMalloc(&big, 16 * kMiB));
  E2E_OK(cudaFree(big));
  std::printf("handled\n");
  return 0;
}
