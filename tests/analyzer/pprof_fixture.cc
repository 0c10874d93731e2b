// Writes the trace of export_traces.h's pprof_export_trace() to the path given, for the `go tool pprof` test
// (pprof_go_check.py).
#include <cstdio>

#include "export_traces.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pprof_fixture TRACE\n");
    return 2;
  }
  memtrace::test::write_file(argv[1], memtrace::test::pprof_export_trace());
  return 0;
}
