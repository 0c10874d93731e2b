// Loads libmemtrace.so into itself after writing its own inject request, as `memtrace attach` does to a running
// process (proto/control_protocol.h: DIR/PID.inject, then dlopen through the injector). Usage:
//   e2e_inject_self LIBMEMTRACE MODE    MODE: the request file's mode, octal (0600 is the valid one)
// Prints "loaded" once dlopen returned, then waits for "exit" on stdin. Not preloaded: no CUDA call is made.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "../../../proto/control_protocol.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  char dir[4096], path[4200];
  if (!memtrace::control_dir(runtime, true, getuid(), dir, sizeof dir) ||
      !memtrace::control_path(dir, getpid(), memtrace::kInjectRequestSuffix, path, sizeof path))
    return 2;
  mkdir(dir, 0700);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || fchmod(fd, static_cast<mode_t>(std::strtol(argv[2], nullptr, 8))) != 0) return 3;
  close(fd);
  if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 4;
  }
  std::printf("loaded\n");
  std::fflush(stdout);
  std::string command;
  while (std::getline(std::cin, command))
    if (command == "exit") return 0;
  return 1;
}
