// Writes stack_export_traces.h's traces into the folder given (created beforehand), one file each, for
// check_speedscope_schema.py. Usage: write_stack_export_traces DIR
#include <iostream>
#include <string>

#include "stack_export_traces.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_stack_export_traces DIR\n";
    return 2;
  }
  for (const auto& [name, bytes] : memtrace::test::stack_export_traces()) {
    const std::string path = std::string(argv[1]) + "/" + name;
    memtrace::test::write_file(path, bytes);
    std::cout << path << '\n';
  }
  return 0;
}
