// The library the injector tests load into attach_target: its constructor appends "loaded into PID\n" to the file
// named by the target's ATTACH_MARKER, proof that dlopen ran it inside that process.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void attach_marker_loaded(void) {
  const char* path = getenv("ATTACH_MARKER");
  if (!path) return;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[64];
  const int n = snprintf(line, sizeof line, "loaded into %d\n", (int)getpid());
  if (write(fd, line, (size_t)n) != n) abort();
  close(fd);
}
