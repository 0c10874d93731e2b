// memtrace: the offline analyzer for .mtrace files, and `memtrace run` to record one (cli/commands.h).
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "read/read_progress.h"

int main(int argc, char** argv) {
  // Every read of a trace draws a progress bar on stderr when stderr is a terminal, cleared before anything the
  // command prints on the terminal (read/read_progress.h).
  memtrace::TerminalReadProgress progress(STDERR_FILENO, std::cerr, STDOUT_FILENO, std::cout);
  return memtrace::run_memtrace(std::vector<std::string>(argv + 1, argv + argc));
}
