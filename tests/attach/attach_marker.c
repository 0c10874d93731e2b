// The library the injector tests load into attach_target: its constructor appends "loaded into PID\n" to the file
// named by the target's ATTACH_MARKER, proof that dlopen ran it inside that process; with ATTACH_MARKER_SLEEP_MS
// it first sleeps that long (a call that lasts, for a signal to come during it); with ATTACH_MARKER_THREAD it writes
// the id of the thread that ran it into that file (which thread the injector chose).
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((constructor)) static void attach_marker_loaded(void) {
  const char* path = getenv("ATTACH_MARKER");
  if (!path) return;
  const char* sleep_ms = getenv("ATTACH_MARKER_SLEEP_MS");
  if (sleep_ms) {
    const long ms = atol(sleep_ms);
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000}, left;
    while (nanosleep(&pause, &left) != 0) pause = left;
  }
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[64];
  const int n = snprintf(line, sizeof line, "loaded into %d\n", (int)getpid());
  if (write(fd, line, (size_t)n) != n) abort();
  close(fd);
  const char* thread_path = getenv("ATTACH_MARKER_THREAD");
  const int thread_fd = thread_path ? open(thread_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  if (thread_fd < 0) return;
  const int m = snprintf(line, sizeof line, "%ld", (long)syscall(SYS_gettid));
  if (write(thread_fd, line, (size_t)m) != m) abort();
  close(thread_fd);
}
