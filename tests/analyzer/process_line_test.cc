// The overview's "process:" line, which names the traced process: its pid, its host and its command line, or
// says that the command line was not recorded (MEMTRACE_REDACT_ARGS, or /proc/self/cmdline unreadable) rather
// than end on a comma with nothing after it.
#include <gtest/gtest.h>

#include <vector>

#include "trace_builder.h"

namespace memtrace {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A trace of pid 2759 on `host` ("" for none) run as `argv`: one 1 MiB cudaMalloc on device 0 and its TraceEnd.
std::string trace_of(const std::string& host, const std::vector<std::string>& argv, const std::string& name) {
  test::TraceBuilder b;
  proto::Record start;
  start.mutable_start()->set_pid(2759);
  start.mutable_start()->set_hostname(host);
  start.mutable_start()->set_start_monotonic_ns(1'000'000'000);
  for (const std::string& arg : argv) start.mutable_start()->add_argv(arg);
  b.record(start).event(test::driver_alloc(0, 0x7f0000000000, kMiB)).end(1, 0).end_chunk();
  std::string path = test::temp_path(name);
  test::write_file(path, b.bytes());
  return path;
}

// The overview's second line.
std::string process_line(const std::string& path) {
  const std::string text = test::memtrace_stdout("summary " + path);
  const size_t begin = text.find('\n') + 1;
  return text.substr(begin, text.find('\n', begin) + 1 - begin);
}

TEST(ProcessLine, NamesTheCommandLine) {
  EXPECT_EQ(process_line(trace_of("vm", {"python3", "train.py"}, "process-argv.mtrace")),
            "  process: pid 2759 on vm, python3 train.py\n");
}

TEST(ProcessLine, SaysWhenTheCommandLineWasNotRecorded) {
  EXPECT_EQ(process_line(trace_of("vm", {}, "process-redacted.mtrace")),
            "  process: pid 2759 on vm (command line not recorded)\n");
  EXPECT_EQ(process_line(trace_of("", {}, "process-redacted-no-host.mtrace")),
            "  process: pid 2759 (command line not recorded)\n");
}

}  // namespace
}  // namespace memtrace
