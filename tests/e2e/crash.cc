// Dies of a fatal signal after three CUDA events, with or without a handler of its own.
// Usage: e2e_crash segv|bus|abrt|fpe|ill none|before|after MARKER_FILE
//   before: the program's handler is installed before the first CUDA call (before tracing starts);
//   after:  it is installed after the CUDA calls (the tracer is already running);
//   none:   no handler: the default action.
// The handler appends "handler SIG" to MARKER_FILE, restores the default action through signal() (as
// Python's faulthandler and most crash reporters do) and returns: a fault then repeats and kills the
// process, and abort() raises again itself. So with or without a handler the process dies by the signal.
// Events: alloc 4 MiB, alloc 8 MiB, free 4 MiB (3 events), then the crash.
// Every line goes out unbuffered: the process does not get to flush stdio.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "e2e_util.h"

namespace {

const char* g_marker = nullptr;

void program_handler(int sig) {
  char line[32] = "handler ";
  size_t n = std::strlen(line);
  if (sig >= 10) line[n++] = static_cast<char>('0' + sig / 10);
  line[n++] = static_cast<char>('0' + sig % 10);
  line[n++] = '\n';
  int fd = open(g_marker, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    if (write(fd, line, n) < 0) {}
    close(fd);
  }
  signal(sig, SIG_DFL);
}

void install_handler(int sig) {
  struct sigaction action {};
  action.sa_handler = program_handler;
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, nullptr) != 0) std::exit(5);
}

// What the program sees when it asks for its disposition: its own handler, whoever else is chained.
void report_query(int sig) {
  struct sigaction current {};
  sigaction(sig, nullptr, &current);
  std::printf("query: %s\n", current.sa_handler == program_handler ? "own handler"
                             : current.sa_handler == SIG_DFL     ? "default"
                                                                 : "something else");
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
  if (std::strcmp(mode, "before") == 0) install_handler(sig);
  void *a, *b;
  E2E_OK(cudaMalloc(&a, 4 * kMiB));
  E2E_OK(cudaMalloc(&b, 8 * kMiB));
  E2E_OK(cudaFree(a));
  if (std::strcmp(mode, "after") == 0) install_handler(sig);
  report_query(sig);
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
