// Dies of a fatal signal after three CUDA events, with or without a handler of its own.
// Usage: e2e_crash segv|bus|abrt|fpe|ill HANDLER MARKER_FILE, HANDLER one of
//   none:                            no handler: the default action;
//   before, before-signal, before-siginfo: the program's handler is installed before the first CUDA call
//                                    (before tracing starts);
//   after, after-signal, after-siginfo:    it is installed after the CUDA calls (tracing is running);
//   plain: with sigaction() and sa_handler; -signal: with signal(); -siginfo: with sigaction() and
//   SA_SIGINFO (sa_sigaction, which also checks that siginfo_t names the signal).
// The handler appends "handler SIG" (siginfo: "handler SIG siginfo ok" or "... siginfo wrong") to
// MARKER_FILE, restores the default action through signal() (as Python's faulthandler and most crash
// reporters do) and returns: a fault then repeats and kills the process, and abort() raises again itself.
// So with or without a handler the process dies by the signal. Two handlers that do not let it die:
//   after-exit:    the handler (installed after the CUDA calls) writes "handler SIG" and calls _exit(3);
//   after-recover: the handler writes "handler SIG" and siglongjmp()s back into main, which then
//                  allocates 16 MiB, frees it, prints "recovered" and returns 0 (as programs that probe
//                  memory under a SIGSEGV handler do).
// Events: alloc 4 MiB, alloc 8 MiB, free 4 MiB (3 events), then the crash (after-recover: 2 more events,
// alloc 16 MiB and free 16 MiB).
// Every line goes out unbuffered: the process does not get to flush stdio.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "e2e_util.h"

namespace {

const char* g_marker = nullptr;

// Appends "handler SIG" and `suffix` as one line to the marker file (async-signal-safe).
void write_marker(int sig, const char* suffix) {
  char line[64] = "handler ";
  size_t n = std::strlen(line);
  if (sig >= 10) line[n++] = static_cast<char>('0' + sig / 10);
  line[n++] = static_cast<char>('0' + sig % 10);
  for (const char* p = suffix; *p;) line[n++] = *p++;
  line[n++] = '\n';
  int fd = open(g_marker, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    if (write(fd, line, n) < 0) {
    }
    close(fd);
  }
}

void program_handler(int sig) {
  write_marker(sig, "");
  signal(sig, SIG_DFL);
}

void exiting_handler(int sig) {
  write_marker(sig, "");
  _exit(3);
}

sigjmp_buf g_recover_point;

void recovering_handler(int sig) {
  write_marker(sig, "");
  siglongjmp(g_recover_point, 1);
}

void program_siginfo_handler(int sig, siginfo_t* info, void*) {
  write_marker(sig, info && info->si_signo == sig ? " siginfo ok" : " siginfo wrong");
  signal(sig, SIG_DFL);
}

// style: "" (sigaction, sa_handler), "-signal" (signal()), "-siginfo" (sigaction, SA_SIGINFO).
void install_handler(int sig, const char* style) {
  if (std::strcmp(style, "-signal") == 0) {
    if (signal(sig, program_handler) == SIG_ERR) std::exit(5);
    return;
  }
  struct sigaction action {};
  if (std::strcmp(style, "-siginfo") == 0) {
    action.sa_sigaction = program_siginfo_handler;
    action.sa_flags = SA_SIGINFO;
  } else if (std::strcmp(style, "-exit") == 0) {
    action.sa_handler = exiting_handler;
  } else if (std::strcmp(style, "-recover") == 0) {
    action.sa_handler = recovering_handler;
  } else {
    action.sa_handler = program_handler;
  }
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, nullptr) != 0) std::exit(5);
}

// What the program sees when it asks for its disposition: its own handler, whoever else is chained.
void report_query(int sig) {
  struct sigaction current {};
  sigaction(sig, nullptr, &current);
  bool own = (current.sa_flags & SA_SIGINFO)
                 ? current.sa_sigaction == program_siginfo_handler
                 : current.sa_handler == program_handler || current.sa_handler == exiting_handler ||
                       current.sa_handler == recovering_handler;
  std::printf("query: %s\n", own ? "own handler" : current.sa_handler == SIG_DFL ? "default" : "something else");
}

// Both operands volatile: with a constant dividend the compiler may replace the division by a comparison.
volatile int g_seven = 7;
volatile int g_zero = 0;

__attribute__((noinline)) void crash_segv() { *static_cast<volatile int*>(nullptr) = 1; }

// A read past the end of a file mapping: the page exists in the mapping but not in the file.
__attribute__((noinline)) void crash_bus() {
  char path[] = "/tmp/e2e_crash_bus_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || ftruncate(fd, 4096) != 0) std::exit(6);
  auto* page = static_cast<volatile char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (page == MAP_FAILED || ftruncate(fd, 0) != 0) std::exit(6);
  unlink(path);
  page[0] = 1;
}

__attribute__((noinline)) void crash_fpe() { std::printf("%d\n", g_seven / g_zero); }

__attribute__((noinline)) void crash_ill() { __builtin_trap(); }

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc != 4) return 2;
  const char* kind = argv[1];
  const char* mode = argv[2];
  g_marker = argv[3];
  int sig = std::strcmp(kind, "segv") == 0   ? SIGSEGV
            : std::strcmp(kind, "bus") == 0  ? SIGBUS
            : std::strcmp(kind, "abrt") == 0 ? SIGABRT
            : std::strcmp(kind, "fpe") == 0  ? SIGFPE
            : std::strcmp(kind, "ill") == 0  ? SIGILL
                                             : 0;
  if (!sig) return 2;
  bool before = std::strncmp(mode, "before", 6) == 0;
  bool after = std::strncmp(mode, "after", 5) == 0;
  if (!before && !after && std::strcmp(mode, "none") != 0) return 2;
  const char* style = mode + (before ? 6 : after ? 5 : 4);
  if (before) install_handler(sig, style);
  void *a, *b;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  E2E_OK(cudaMalloc(&b, 8 * kMiB));
  E2E_OK(cudaFree(a));
  if (after) install_handler(sig, style);
  report_query(sig);
  if (sigsetjmp(g_recover_point, 1) != 0) {
    void* c;
    E2E_OK(cudaMalloc(&c, 16 * kMiB));
    E2E_OK(cudaFree(c));
    std::printf("recovered\n");
    return 0;
  }
  std::printf("crashing with signal %d\n", sig);
  switch (sig) {
    case SIGSEGV: crash_segv(); break;
    case SIGBUS: crash_bus(); break;
    case SIGABRT: std::abort();
    case SIGFPE: crash_fpe(); break;
    case SIGILL: crash_ill(); break;
  }
  std::printf("still alive\n");
  return 1;
}
