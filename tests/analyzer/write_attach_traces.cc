// Writes attach_traces.h's traces (traces that began by attach, and a snapshot) into the folder given (created
// beforehand), one file each, for check_json_schema.py's `--more-traces-writer`. Usage: write_attach_traces DIR
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "attach_traces.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_attach_traces DIR\n";
    return 2;
  }
  using memtrace::test::TraceBuilder;
  const std::vector<std::pair<std::string, TraceBuilder>> traces = {
      {"attached_torch.mtrace", memtrace::test::attached_torch_trace()},
      {"attached_mismatch.mtrace", memtrace::test::attached_torch_trace(5 * memtrace::test::kMiB)},
      {"attached_unlisted_blocks.mtrace", memtrace::test::attached_unlisted_blocks_trace()},
      {"snapshot.mtrace", memtrace::test::snapshot_trace()},
  };
  for (const auto& [name, builder] : traces) {
    const std::string path = std::string(argv[1]) + "/" + name;
    memtrace::test::write_file(path, builder.bytes());
    std::cout << path << '\n';
  }
  return 0;
}
