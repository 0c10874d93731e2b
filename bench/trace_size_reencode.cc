// Rewrites a .mtrace file of format version 1, 2 or 3 in trace format v3, chunk for chunk, with the
// tracer's Event encoder (bench/trace_size_reencode.h): the file the tracer of today would have written for
// the same run, so that bench/trace_size can give the v3 size of the older traces. A measurement tool.
//
//   trace_size_reencode IN.mtrace OUT.mtrace
// Prints one line: "chunks N bytes B" of OUT. Exit status 1, one line on stderr, for a bad input.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "trace_size_reencode.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: trace_size_reencode IN.mtrace OUT.mtrace\n");
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw std::runtime_error("cannot open");
    std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    memtrace::reencode::Chunks chunks = memtrace::reencode::split_chunks(file);
    if (chunks.version < 1 || chunks.version > 3)
      throw std::runtime_error("format version " + std::to_string(chunks.version) + ", not 1, 2 or 3");
    memtrace::reencode::Reencoder reencoder(0, chunks.version);
    std::string out = memtrace::reencode::header_frame(3);
    for (const std::string& records : chunks.records)
      out += memtrace::reencode::compress_chunk(reencoder.chunk(records));
    std::ofstream(argv[2], std::ios::binary | std::ios::trunc).write(out.data(), std::streamsize(out.size()));
    std::printf("chunks %zu bytes %zu\n", chunks.records.size(), out.size());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "trace_size_reencode: %s: %s\n", argv[1], error.what());
    return 1;
  }
  return 0;
}
