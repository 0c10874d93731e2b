// memtrace: the offline analyzer for .mtrace files, and `memtrace run` to record one (cli/commands.h).
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) { return memtrace::run_memtrace(std::vector<std::string>(argv + 1, argv + argc)); }
